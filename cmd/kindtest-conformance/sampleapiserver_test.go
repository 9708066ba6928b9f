package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/images"
)

func TestSampleAPIServerVersion(t *testing.T) {
	if got := sampleAPIServerVersion("1.29.2"); got != "v0.29.2" {
		t.Fatalf("sample-apiserver:1.29.2 is %s, want v0.29.2", got)
	}
}

func TestGoPlatformEnv(t *testing.T) {
	for platform, want := range map[string]string{
		"linux/amd64":    "GOOS=linux GOARCH=amd64",
		"linux/arm64":    "GOOS=linux GOARCH=arm64",
		"linux/arm64/v8": "GOOS=linux GOARCH=arm64",
		"linux/arm/v7":   "GOOS=linux GOARCH=arm GOARM=7",
	} {
		env, err := goPlatformEnv(platform)
		if got := strings.Join(env, " "); err != nil || got != want {
			t.Errorf("goPlatformEnv(%s) = %q, %v; want %q", platform, got, err, want)
		}
	}
	for _, bad := range []string{"", "amd64", "windows/amd64"} {
		if _, err := goPlatformEnv(bad); err == nil {
			t.Errorf("goPlatformEnv(%q) accepted", bad)
		}
	}
}

func TestSampleAPIServerTar(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleAPIServerTar(&buf, []byte("ELF")); err != nil {
		t.Fatal(err)
	}
	got := tarHeaders(t, &buf)
	// Where upstream's Dockerfile puts it (ADD sample-apiserver /sample-apiserver),
	// runnable; and a /tmp anyone may write to.
	if h := got["sample-apiserver"]; h == nil || h.Mode != 0o755 || h.Size != 3 {
		t.Errorf("/sample-apiserver: %+v", h)
	}
	if h := got["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", h)
	}
	for _, f := range []string{"etc/passwd", "etc/group"} {
		if got[f] == nil {
			t.Errorf("no /%s", f)
		}
	}
}

func TestDecideSampleAPIServer(t *testing.T) {
	configs := []imageConfig{{ID: "APIServer", Name: "sample-apiserver", Version: "1.29.2", Ref: "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"}}
	users := map[string][]fileUse{"APIServer": {{File: "test/e2e/apimachinery/aggregator.go", Specs: 1}}}
	p := decide(configs, users, nil, sourceVersions{agnhost: "2.66.1", nonewprivs: "1.4", sampleAPIServer: "v0.29.2"}, "v1.37.2")
	if len(p) != 1 || !p[0].Built || p[0].unmet() || !strings.Contains(p[0].How, "k8s.io/sample-apiserver v0.29.2") {
		t.Fatalf("plan %+v; want sample-apiserver built from v0.29.2", p)
	}
	// A tag the nested module does not build.
	p = decide(configs, users, nil, sourceVersions{sampleAPIServer: "v0.33.7"}, "v1.37.2")
	if len(p) != 1 || p[0].Built || !strings.HasPrefix(p[0].describe(), "NOT BUILT ") || !strings.Contains(p[0].How, "v0.33.7") {
		t.Fatalf("plan %+v; want it not built, naming both versions", p)
	}
	// Without the Aggregator spec, not planned.
	if p := decide(configs, nil, nil, sourceVersions{sampleAPIServer: "v0.29.2"}, "v1.37.2"); len(p) != 0 {
		t.Fatalf("planned %+v without a spec naming it", p)
	}
}

// conformance/sample-apiserver builds the sample API server that the e2e
// framework of the release conformance/ builds names (manifest.go), and
// holds it as a tool, for go mod tidy to keep its packages.
func TestSampleAPIServerModule(t *testing.T) {
	v, src := releaseSource(t)
	manifest, err := os.ReadFile(filepath.Join(src, "test", "utils", "image", "manifest.go"))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(parseManifest(manifest), func(c imageConfig) bool { return c.Name == "sample-apiserver" })
	if i < 0 {
		t.Fatalf("the manifest of %s names no sample-apiserver image", v)
	}
	tag := parseManifest(manifest)[i].Version
	modFile := filepath.Join("..", "..", "conformance", sampleAPIServerDir, "go.mod")
	got, err := images.RequiredVersion(modFile, sampleAPIServerModule)
	if err != nil {
		t.Fatal(err)
	}
	if want := sampleAPIServerVersion(tag); got != want {
		t.Errorf("%s requires %s %s; the e2e framework of %s runs sample-apiserver:%s, which is %s", modFile, sampleAPIServerModule, got, v, tag, want)
	}
	mod, err := os.ReadFile(modFile)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(goModTools(mod), sampleAPIServerModule) {
		t.Errorf("%s has no tool %s", modFile, sampleAPIServerModule)
	}
}
