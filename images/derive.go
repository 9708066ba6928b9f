package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Go modules that the nested modules kubernetes/, etcd/ and coredns/
// build.
const (
	kubernetesModule = "k8s.io/kubernetes"
	etcdModule       = "go.etcd.io/etcd/server/v3"
	corednsModule    = "github.com/coredns/coredns"
)

// moduleReq names a nested module under images/ and the version of the Go
// module it is to build.
type moduleReq struct {
	// dir is the nested module's directory under images/: "etcd".
	dir string
	// path is the module it requires: "go.etcd.io/etcd/server/v3".
	path string
	// version is the version to build: "v3.6.5".
	version string
}

// deriveEnv is the environment of go mod download and go mod tidy in a
// derived module: they may add requirements and write go.sum.
var deriveEnv = []string{"GOWORK=off", "GOFLAGS=-mod=mod"}

// derivedStamp, in a derived module's directory, holds a hash of what the
// module was derived from, so that go mod tidy runs once per recipe.
const derivedStamp = "kindtest-derived"

// deriveModule writes, under the cache directory, a copy of the nested
// module req.dir that builds req.path at req.version, runs go mod tidy in
// it, and returns its directory. The checked-in module is only read: its
// module path, go directive and Go files are kept. For Kubernetes, every
// staging module that k8s.io/kubernetes replaces with its own directory is
// replaced with its published version instead.
func (b *builder) deriveModule(ctx context.Context, req moduleReq) (string, error) {
	start := time.Now()
	srcDir := filepath.Join(b.cfg.sourceDir, req.dir)
	dir := filepath.Join(b.cfg.cacheDir, "modules", req.dir+"-"+req.version)
	checkedIn, err := os.ReadFile(filepath.Join(srcDir, "go.mod"))
	if err != nil {
		return "", err
	}
	header, err := derivedGoMod(checkedIn, moduleReq{dir: req.dir}, nil, nil)
	if err != nil {
		return "", err
	}
	// go mod download needs a main module; one without requirements keeps
	// it from resolving anything but the module asked for.
	downloadDir := filepath.Join(b.cfg.cacheDir, "modules", "download")
	if err := os.MkdirAll(downloadDir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(downloadDir, "go.mod"), []byte(header), 0o644); err != nil {
		return "", err
	}
	upstreamGoMod, err := downloadModule(ctx, downloadDir, req.path, req.version)
	if err != nil && req.path == kubernetesModule {
		if served, lerr := Versions(ctx, downloadDir, req.path, deriveEnv...); lerr == nil && !slices.Contains(served, req.version) {
			return "", fmt.Errorf("Kubernetes %s is not served by the Go module proxy (%s): %s", req.version, GoEnv(ctx, "GOPROXY"), servedReleases(served))
		}
	}
	if err != nil {
		return "", err
	}

	var replaces, tools []string
	if req.path == kubernetesModule {
		staging := StagingModules(upstreamGoMod)
		if len(staging) == 0 {
			return "", fmt.Errorf("the go.mod of %s@%s replaces no module with ./staging/", req.path, req.version)
		}
		replaces = stagingReplaces(staging, StagingVersion(req.version))
		for _, name := range kubernetesCommands {
			tools = append(tools, kubernetesModule+"/cmd/"+name)
		}
	}
	goMod, err := derivedGoMod(checkedIn, req, replaces, tools)
	if err != nil {
		return "", err
	}
	goFiles, err := goSourceFiles(srcDir)
	if err != nil {
		return "", err
	}

	recipe := []string{goMod}
	for _, f := range goFiles {
		recipe = append(recipe, f.name, string(f.data))
	}
	stamp := hashStrings(recipe...)
	if old, err := os.ReadFile(filepath.Join(dir, derivedStamp)); err == nil && string(old) == stamp {
		if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
			b.cfg.logger.Printf("  derived module %s for %s %s is up to date", dir, req.path, req.version)
			return dir, nil
		}
	}

	// Start from nothing, so that no file of an older recipe survives.
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return "", err
	}
	for _, f := range goFiles {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return "", err
		}
	}
	if err := command(ctx, dir, deriveEnv, "go", "mod", "tidy"); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, derivedStamp), []byte(stamp), 0o644); err != nil {
		return "", err
	}
	b.cfg.logger.Printf("  derived module %s for %s %s in %s", dir, req.path, req.version, time.Since(start).Round(100*time.Millisecond))
	return dir, nil
}

// servedReleases says which Kubernetes releases of served there are: the
// newest patch of each of the newest minors, for -kubernetes-version.
func servedReleases(served []string) string {
	list := NewestReleases(served, 4)
	if len(list) == 0 {
		return "it serves no release of k8s.io/kubernetes: check GOPROXY"
	}
	return "the newest releases it serves are " + strings.Join(list, ", ") + " (one per minor): pass one of those to -kubernetes-version"
}

// downloadModule downloads path@version into the module cache and returns
// its go.mod.
func downloadModule(ctx context.Context, dir, path, version string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), deriveEnv...)
	var stdout bytes.Buffer
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var info struct {
		GoMod string
		Error string
	}
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil && runErr == nil {
		return nil, fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	if info.Error != "" {
		return nil, fmt.Errorf("go mod download %s@%s: %s", path, version, info.Error)
	}
	if runErr != nil {
		return nil, fmt.Errorf("go mod download %s@%s: %w\n%s", path, version, runErr, stderr.String())
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, fmt.Errorf("go.mod of %s@%s: %w", path, version, err)
	}
	return data, nil
}

// goFile is a Go source file of a nested module, copied into its derived
// module.
type goFile struct {
	name string
	data []byte
}

// goSourceFiles returns the non-test Go files directly in dir.
func goSourceFiles(dir string) ([]goFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []goFile
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		files = append(files, goFile{name: name, data: data})
	}
	return files, nil
}

// derivedGoMod returns the go.mod of a module derived from a checked-in
// one: the same module path and go directive, a requirement of req.path at
// req.version (none when req.path is empty), and the given replace and tool
// lines. go mod tidy fills in the rest.
func derivedGoMod(checkedIn []byte, req moduleReq, replaces, tools []string) (string, error) {
	var modulePath, goVersion string
	sc := bufio.NewScanner(bytes.NewReader(checkedIn))
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
	if modulePath == "" || goVersion == "" {
		return "", fmt.Errorf("images/%s/go.mod lacks a module or go directive", req.dir)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Derived by kindtest's node image builder from images/%s/go.mod", req.dir)
	if req.path != "" {
		fmt.Fprintf(&b, " to build %s %s", req.path, req.version)
	}
	fmt.Fprintf(&b, ".\n// Generated: edit the checked-in module or the builder instead.\nmodule %s\n\ngo %s\n", modulePath, goVersion)
	if req.path != "" {
		fmt.Fprintf(&b, "\nrequire %s %s\n", req.path, req.version)
	}
	for _, block := range []struct {
		keyword string
		lines   []string
	}{{"replace", replaces}, {"tool", tools}} {
		if len(block.lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (\n", block.keyword)
		for _, l := range block.lines {
			fmt.Fprintf(&b, "\t%s\n", l)
		}
		b.WriteString(")\n")
	}
	return b.String(), nil
}

// stagingReplaces are the replace lines that pin every staging module to
// its published version.
func stagingReplaces(staging []string, version string) []string {
	lines := make([]string, 0, len(staging))
	for _, m := range staging {
		lines = append(lines, m+" => "+m+" "+version)
	}
	return lines
}

// componentModules returns the versions of etcd and CoreDNS to build, read
// from the image references kubeadm expects (`kubeadm config images list`):
// registry.k8s.io/etcd:3.6.5-0 is go.etcd.io/etcd/server/v3 v3.6.5, and
// registry.k8s.io/coredns/coredns:v1.12.1 is github.com/coredns/coredns
// v1.12.1.
func componentModules(refs []string) ([]moduleReq, error) {
	var etcd, coredns *moduleReq
	for _, ref := range refs {
		tag := imageTag(ref)
		switch componentName(ref) {
		case "etcd":
			v, err := etcdModuleVersion(tag)
			if err != nil {
				return nil, fmt.Errorf("kubeadm expects %s: %w", ref, err)
			}
			etcd = &moduleReq{dir: "etcd", path: etcdModule, version: v}
		case "coredns":
			v, err := corednsModuleVersion(tag)
			if err != nil {
				return nil, fmt.Errorf("kubeadm expects %s: %w", ref, err)
			}
			coredns = &moduleReq{dir: "coredns", path: corednsModule, version: v}
		}
	}
	if etcd == nil || coredns == nil {
		return nil, fmt.Errorf("kubeadm's image list %v lacks etcd or CoreDNS", refs)
	}
	return []moduleReq{*etcd, *coredns}, nil
}

// imageTag returns the tag of an image reference, or "" if it has none.
func imageTag(ref string) string {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[i+1:]
	}
	return ""
}

var semverCore = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// etcdModuleVersion maps an etcd image tag, MAJOR.MINOR.PATCH-REVISION
// (the revision counts rebuilds of the same etcd), to the version of
// go.etcd.io/etcd/server/v3. images/etcd/main.go imports
// go.etcd.io/etcd/server/v3/etcdmain, which exists from etcd 3.5 on.
func etcdModuleVersion(tag string) (string, error) {
	v, _, _ := strings.Cut(strings.TrimPrefix(tag, "v"), "-")
	m := semverCore.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("etcd image tag %q is not MAJOR.MINOR.PATCH[-REVISION]", tag)
	}
	minor, _ := strconv.Atoi(m[2])
	if m[1] != "3" || minor < 5 {
		return "", fmt.Errorf("etcd %s: kindtest builds etcd from %s, whose etcdmain package exists from 3.5 on", v, etcdModule)
	}
	return "v" + v, nil
}

// corednsModuleVersion maps a CoreDNS image tag (v1.12.1, or 1.8.0 as
// older kubeadm releases wrote it) to the version of
// github.com/coredns/coredns.
func corednsModuleVersion(tag string) (string, error) {
	v := strings.TrimPrefix(tag, "v")
	if !semverCore.MatchString(v) {
		return "", fmt.Errorf("CoreDNS image tag %q is not vMAJOR.MINOR.PATCH", tag)
	}
	return "v" + v, nil
}
