package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/imageref"
)

var update = flag.Bool("update", false, "rewrite conformance/deps.go from e2e_test.go")

func TestVersionErrorNamesTheVersionAndServedReleases(t *testing.T) {
	served := []string{"v1.34.0", "v1.34.4", "v1.35.4", "v1.36.0", "v1.36.3", "v1.37.0-rc.1", "v1.37.2", "v1.37.10", "v0.4.1"}
	err := versionError("v1.99.0", "https://proxy.golang.org", served)
	want := "no e2e test binary for Kubernetes v1.99.0: the Go module proxy (https://proxy.golang.org) does not serve k8s.io/kubernetes@v1.99.0; " +
		"its newest releases are v1.37.10, v1.36.3, v1.35.4, v1.34.4"
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error\n%s\nwant it to start with\n%s", err, want)
	}
	if err := versionError("v1.99.0", "", nil); !strings.Contains(err.Error(), "Kubernetes v1.99.0") || !strings.Contains(err.Error(), "nor any release") {
		t.Fatalf("error with nothing served: %v", err)
	}
}

func TestParseRelease(t *testing.T) {
	for v, ok := range map[string]bool{"v1.37.2": true, "v1.37.02": false, "1.37.2": false, "v1.37.2-rc.0": false, "v1.37": false} {
		if _, got := images.ParseRelease(v); got != ok {
			t.Errorf("parseRelease(%q) ok = %t, want %t", v, got, ok)
		}
	}
}

func TestVersionLDFlags(t *testing.T) {
	got := images.KubernetesLDFlags("v1.36.3")
	for _, want := range []string{"k8s.io/component-base/version.gitVersion=v1.36.3", "k8s.io/client-go/pkg/version.gitMinor=36", "gitMajor=1"} {
		if !strings.Contains(got, want) {
			t.Errorf("ldflags %q lack %q", got, want)
		}
	}
}

func TestDerivedGoMod(t *testing.T) {
	upstream := []byte("module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go // comment\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\n")
	staging := images.StagingModules(upstream)
	if strings.Join(staging, ",") != "k8s.io/api,k8s.io/client-go" {
		t.Fatalf("staging modules %v", staging)
	}
	checkedIn, err := os.ReadFile("../../conformance/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod, goVer := goModHeader(checkedIn)
	got := derivedGoMod(mod, goVer, "v1.36.3", staging, goModTools(checkedIn))
	for _, want := range []string{
		"module github.com/kindtest/kindtest/conformance\n",
		"require k8s.io/kubernetes v1.36.3\n",
		"\tk8s.io/api => k8s.io/api v0.36.3\n",
		"\tk8s.io/client-go => k8s.io/client-go v0.36.3\n",
		"\tgithub.com/onsi/ginkgo/v2/ginkgo\n",
		"\tk8s.io/kubernetes/test/images/agnhost\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("derived go.mod lacks %q:\n%s", want, got)
		}
	}
}

// The checked-in module builds the default node image's version.
func TestCheckedInModuleVersion(t *testing.T) {
	v, err := images.RequiredVersion("../../conformance/go.mod", kubernetesModule)
	if err != nil {
		t.Fatal(err)
	}
	if v != imageref.KubernetesVersion {
		t.Fatalf("conformance/go.mod requires %s %s; the default node image is %s", kubernetesModule, v, imageref.KubernetesVersion)
	}
}

func TestDepsFileFromImports(t *testing.T) {
	src := []byte("package e2e\n\nimport (\n\t\"flag\"\n\t\"testing\"\n\n\t\"github.com/onsi/ginkgo/v2\"\n\t_ \"k8s.io/kubernetes/test/e2e/apps\"\n\tyaml \"go.yaml.in/yaml/v2\"\n)\n")
	got, err := depsFile(src)
	if err != nil {
		t.Fatal(err)
	}
	want := "\t_ \"github.com/onsi/ginkgo/v2\"\n\t_ \"go.yaml.in/yaml/v2\"\n\t_ \"k8s.io/kubernetes/test/e2e\"\n\t_ \"k8s.io/kubernetes/test/e2e/apps\"\n)\n"
	if !strings.HasPrefix(got, "//go:build tools\n") || !strings.HasSuffix(got, "import (\n"+want) {
		t.Fatalf("deps.go:\n%s", got)
	}
}

// conformance/deps.go is what depsFile makes of the e2e_test.go of the
// version the module requires (from the module cache, downloaded through
// the proxy when missing). -update rewrites it.
func TestDepsFile(t *testing.T) {
	v, dir := releaseSource(t)
	src, err := os.ReadFile(filepath.Join(dir, "test", "e2e", "e2e_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := depsFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("../../conformance/deps.go", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("../../conformance/deps.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("conformance/deps.go differs from what e2e_test.go of %s gives; run go test ./cmd/kindtest-conformance -run TestDepsFile -update\ngot:\n%s\nwant:\n%s", v, got, want)
	}
}

// releaseSource returns the Kubernetes release that the nested module
// conformance/ requires and the directory of its source in the module
// cache, downloaded through the proxy when missing.
func releaseSource(t *testing.T) (version, dir string) {
	t.Helper()
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module download\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := images.RequiredVersion("../../conformance/go.mod", kubernetesModule)
	if err != nil {
		t.Fatal(err)
	}
	info, err := downloadModule(context.Background(), tmp, kubernetesModule, v)
	if err != nil {
		t.Fatal(err)
	}
	return v, info.Dir
}

// tarHeaders reads every header of the tar stream in buf, by name.
func tarHeaders(t *testing.T, buf *bytes.Buffer) map[string]*tar.Header {
	t.Helper()
	tr := tar.NewReader(buf)
	got := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
	}
}
