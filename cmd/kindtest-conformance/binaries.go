package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kindtest/kindtest/images"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kubernetesModule is the module whose test/e2e package is the
// conformance suite.
const kubernetesModule = "k8s.io/kubernetes"

// e2ePackage is the package whose test binary, e2e.test, holds the specs.
const e2ePackage = kubernetesModule + "/test/e2e"

// tools are the programs built from the module besides e2e.test: the
// ginkgo runner at the version the e2e tests link, kubectl (the kubectl
// specs run it), agnhost, the e2e tests' multi-purpose image, and
// nonewprivs, the nonewprivs image's program (nnp upstream).
var tools = []string{
	"github.com/onsi/ginkgo/v2/ginkgo",
	kubernetesModule + "/cmd/kubectl",
	kubernetesModule + "/test/images/agnhost",
	kubernetesModule + "/test/images/nonewprivs",
}

// goEnv is the environment of every go command here: static binaries, no
// workspace, no VCS stamps (as the node image builder's).
var goEnv = []string{"CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false"}

// binaries are the programs a run needs, built for one Kubernetes version.
type binaries struct {
	version string
	// dir holds e2e.test, ginkgo, kubectl and agnhost.
	dir string
	// moduleDir is the module they were built in; its module cache copy
	// of k8s.io/kubernetes is kubernetesDir.
	moduleDir, kubernetesDir string
}

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// buildBinaries builds e2e.test, ginkgo, kubectl and agnhost for
// Kubernetes version into cacheDir/<version>/bin, unless the binaries
// there were built from the same recipe (the module's go.mod, go.sum and
// deps.go, the flags and the Go version). The checked-in module
// conformance/ builds the version it requires; any other version gets a
// module derived for it under cacheDir. nice is the niceness of the
// compile (0: none).
func buildBinaries(ctx context.Context, log logger, moduleDir, cacheDir, version string, nice int) (binaries, error) {
	checkedIn, err := images.RequiredVersion(filepath.Join(moduleDir, "go.mod"), kubernetesModule)
	if err != nil {
		return binaries{}, err
	}
	if version != checkedIn {
		moduleDir, err = deriveModule(ctx, log, moduleDir, filepath.Join(cacheDir, version, "module"), version)
		if err != nil {
			return binaries{}, err
		}
	}
	b := binaries{version: version, dir: filepath.Join(cacheDir, version, "bin"), moduleDir: moduleDir}
	if b.kubernetesDir, err = moduleDirOf(ctx, moduleDir, kubernetesModule); err != nil {
		return binaries{}, err
	}

	ldflags := images.KubernetesLDFlags(version)
	recipe := []string{version, ldflags, runtime.Version()}
	for _, name := range []string{"go.mod", "go.sum", "deps.go"} {
		data, err := os.ReadFile(filepath.Join(moduleDir, name))
		if err != nil {
			return binaries{}, err
		}
		recipe = append(recipe, name, string(data))
	}
	stamp := hashStrings(recipe...)
	stampFile := filepath.Join(b.dir, ".recipe")
	if old, err := os.ReadFile(stampFile); err == nil && string(old) == stamp && b.complete() {
		log.Printf("e2e.test, ginkgo, kubectl, agnhost and nonewprivs for Kubernetes %s are up to date in %s", version, b.dir)
		return b, nil
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return binaries{}, err
	}
	os.Remove(stampFile)

	start := time.Now()
	log.Printf("building e2e.test for Kubernetes %s (a cold build takes 10 to 20 minutes on 2 cores; the Go build cache makes later ones fast)", version)
	if err := goCommand(ctx, moduleDir, nice, "test", "-c", "-trimpath", "-ldflags", ldflags, "-o", b.path("e2e.test"), e2ePackage); err != nil {
		return binaries{}, err
	}
	log.Printf("built e2e.test in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	args := []string{"build", "-trimpath", "-ldflags", ldflags, "-o", b.dir + string(filepath.Separator)}
	if err := goCommand(ctx, moduleDir, nice, append(args, tools...)...); err != nil {
		return binaries{}, err
	}
	log.Printf("built ginkgo, kubectl, agnhost and nonewprivs in %s", time.Since(start).Round(time.Second))
	if err := os.WriteFile(stampFile, []byte(stamp), 0o644); err != nil {
		return binaries{}, err
	}
	return b, nil
}

func (b binaries) complete() bool {
	for _, name := range []string{"e2e.test", "ginkgo", "kubectl", "agnhost", "nonewprivs"} {
		if _, err := os.Stat(b.path(name)); err != nil {
			return false
		}
	}
	return true
}

// goCommand runs go with args in dir, under nice when asked, keeping the
// tail of its output for the error.
func goCommand(ctx context.Context, dir string, nice int, args ...string) error {
	return goCommandEnv(ctx, dir, nice, nil, args...)
}

// goCommandEnv is goCommand with env added to its environment.
func goCommandEnv(ctx context.Context, dir string, nice int, env []string, args ...string) error {
	name := "go"
	if nice != 0 {
		if _, err := exec.LookPath("nice"); err == nil {
			args = append([]string{"-n", strconv.Itoa(nice), "go"}, args...)
			name = "nice"
		}
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), goEnv...), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, tail(out, 4096))
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// moduleDirOf is the directory of module path in the module cache, as
// the module in dir requires it.
func moduleDirOf(ctx context.Context, dir, path string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), goEnv...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s (in %s): %w", path, dir, err)
	}
	d := strings.TrimSpace(string(out))
	if d == "" {
		return "", fmt.Errorf("module %s is not in the module cache (run go mod download in %s)", path, dir)
	}
	return d, nil
}

// deriveModule writes into dir a module like the checked-in one that
// builds Kubernetes version, and returns dir: the same module path, go
// directive and tools, a requirement of k8s.io/kubernetes at version, each
// staging module replaced with its published v0.MINOR.PATCH, and deps.go
// written from that version's e2e_test.go. A version the module proxy does
// not serve is an error that names it and the releases the proxy has.
func deriveModule(ctx context.Context, log logger, checkedInDir, dir, version string) (string, error) {
	start := time.Now()
	checkedIn, err := os.ReadFile(filepath.Join(checkedInDir, "go.mod"))
	if err != nil {
		return "", err
	}
	modulePath, goVersion := goModHeader(checkedIn)
	if modulePath == "" || goVersion == "" {
		return "", fmt.Errorf("%s/go.mod lacks a module or go directive", checkedInDir)
	}
	// Shared by every version, so that a version the proxy does not serve
	// leaves no directory of its own behind.
	downloadDir := filepath.Join(filepath.Dir(filepath.Dir(dir)), "download")
	if err := os.MkdirAll(downloadDir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(downloadDir, "go.mod"), []byte("module download\n\ngo "+goVersion+"\n"), 0o644); err != nil {
		return "", err
	}
	info, err := downloadModule(ctx, downloadDir, kubernetesModule, version)
	if err != nil {
		served, lerr := images.Versions(ctx, downloadDir, kubernetesModule, "GOWORK=off", "GOFLAGS=-mod=mod")
		if lerr == nil && !slices.Contains(served, version) {
			return "", versionError(version, images.GoEnv(ctx, "GOPROXY"), served)
		}
		return "", err
	}
	upstream, err := os.ReadFile(info.GoMod)
	if err != nil {
		return "", err
	}
	e2eTest, err := os.ReadFile(filepath.Join(info.Dir, "test", "e2e", "e2e_test.go"))
	if err != nil {
		return "", fmt.Errorf("Kubernetes %s has no test/e2e/e2e_test.go: %w", version, err)
	}
	deps, err := depsFile(e2eTest)
	if err != nil {
		return "", fmt.Errorf("Kubernetes %s test/e2e/e2e_test.go: %w", version, err)
	}
	staging := images.StagingModules(upstream)
	if len(staging) == 0 {
		return "", fmt.Errorf("the go.mod of %s@%s replaces no module with ./staging/", kubernetesModule, version)
	}
	goMod := derivedGoMod(modulePath, goVersion, version, staging, goModTools(checkedIn))

	stamp := hashStrings(goMod, deps)
	if old, err := os.ReadFile(filepath.Join(dir, ".derived")); err == nil && string(old) == stamp {
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "deps.go"), []byte(deps), 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod tidy (in %s): %w\n%s", dir, err, tail(out, 4096))
	}
	if err := os.WriteFile(filepath.Join(dir, ".derived"), []byte(stamp), 0o644); err != nil {
		return "", err
	}
	log.Printf("derived the e2e module for Kubernetes %s in %s (%s)", version, dir, time.Since(start).Round(100*time.Millisecond))
	return dir, nil
}

// versionError says that Kubernetes version has no e2e tests to build,
// since the module proxy does not serve that version, and which releases
// it does serve: the newest patch of each of the four newest minors.
func versionError(version, proxy string, served []string) error {
	list := images.NewestReleases(served, 4)
	where := "the Go module proxy"
	if proxy != "" {
		where += " (" + proxy + ")"
	}
	msg := fmt.Sprintf("no e2e test binary for Kubernetes %s: %s does not serve %s@%s", version, where, kubernetesModule, version)
	if len(list) == 0 {
		return errors.New(msg + ", nor any release of it")
	}
	return fmt.Errorf("%s; its newest releases are %s (a node image built with kindtest build -kubernetes-version for one of them has an e2e binary)", msg, strings.Join(list, ", "))
}

// depsFile is deps.go: a file, excluded from builds by the tools tag,
// that imports test/e2e and every package its test files import, so that
// go mod tidy keeps the modules `go test -c` of that package needs.
func depsFile(e2eTest []byte) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "e2e_test.go", e2eTest, parser.ImportsOnly)
	if err != nil {
		return "", err
	}
	imports := []string{e2ePackage}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return "", err
		}
		// Standard library packages have no dot in their first element.
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") && !slices.Contains(imports, p) {
			imports = append(imports, p)
		}
	}
	slices.Sort(imports)
	var b strings.Builder
	b.WriteString(`//go:build tools

// Package conformance records, for go mod tidy, the packages that the test
// files of k8s.io/kubernetes/test/e2e import, so that ` + "`go test -c`" + ` of that
// package finds them all in this module. Written from e2e_test.go by
// cmd/kindtest-conformance (TestDepsFile keeps this copy equal to it).
package conformance

import (
`)
	for _, p := range imports {
		fmt.Fprintf(&b, "\t_ %q\n", p)
	}
	b.WriteString(")\n")
	return b.String(), nil
}

// derivedGoMod is the go.mod of a module derived for version.
func derivedGoMod(modulePath, goVersion, version string, staging, toolLines []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Derived by cmd/kindtest-conformance from conformance/go.mod to build the\n// e2e tests of Kubernetes %s. Generated: edit the checked-in module instead.\n", version)
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\nrequire %s %s\n\nreplace (\n", modulePath, goVersion, kubernetesModule, version)
	sv := images.StagingVersion(version)
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, sv)
	}
	b.WriteString(")\n\ntool (\n")
	for _, t := range toolLines {
		fmt.Fprintf(&b, "\t%s\n", t)
	}
	b.WriteString(")\n")
	return b.String()
}

// goModHeader returns a go.mod's module path and go version.
func goModHeader(goMod []byte) (modulePath, goVersion string) {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "module":
			modulePath = strings.Trim(fields[1], `"`)
		case "go":
			goVersion = fields[1]
		}
	}
	return modulePath, goVersion
}

// goModTools returns the packages of a go.mod's tool block.
func goModTools(goMod []byte) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "tool (":
			in = true
		case in && line == ")":
			in = false
		case in && line != "":
			out = append(out, line)
		case strings.HasPrefix(line, "tool "):
			out = append(out, strings.TrimSpace(strings.TrimPrefix(line, "tool ")))
		}
	}
	return out
}

type moduleInfo struct {
	Dir, GoMod, Error string
}

// downloadModule downloads path@version into the module cache.
func downloadModule(ctx context.Context, dir, path, version string) (moduleInfo, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var info moduleInfo
	jerr := json.Unmarshal(stdout.Bytes(), &info)
	switch {
	case info.Error != "":
		return info, fmt.Errorf("go mod download %s@%s: %s", path, version, info.Error)
	case runErr != nil:
		return info, fmt.Errorf("go mod download %s@%s: %w\n%s", path, version, runErr, tail(stderr.Bytes(), 4096))
	case jerr != nil:
		return info, fmt.Errorf("go mod download %s@%s: %w", path, version, jerr)
	}
	return info, nil
}

// hashStrings hashes a recipe given as strings.
func hashStrings(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}
