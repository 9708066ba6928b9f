package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/enginetest"
)

// libraryModule is kindtest's module path.
const libraryModule = "github.com/kindtest/kindtest"

// repoRoot returns the root of this checkout: the directory above that
// holds kindtest's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(data), "module "+libraryModule+"\n") {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no kindtest go.mod above the working directory")
		}
	}
}

// runIn runs a program in dir with extra environment and returns its
// combined output; a failure ends the test with that output.
func runIn(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return string(out)
}

// goEnvValue returns a go env variable.
func goEnvValue(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// serveWorkingTree writes a file-based module proxy that serves this
// working tree as kindtest at a fresh pseudo-version, zipped by the Go
// module proxy's rules (tools/modproxy), and returns the environment that
// makes the go command use it, and the version. The module cache entries of
// that version are removed when the test ends.
func serveWorkingTree(ctx context.Context, t *testing.T) (env []string, version string) {
	t.Helper()
	root := repoRoot(t)
	rnd := make([]byte, 6)
	rand.Read(rnd)
	version = "v0.0.0-" + time.Now().UTC().Format("20060102150405") + "-" + hex.EncodeToString(rnd)
	proxy := t.TempDir()
	out := runIn(ctx, t, filepath.Join(root, "tools"), []string{"GOWORK=off", "GOFLAGS=-mod=readonly"},
		"go", "run", "./modproxy", "-dir", root, "-module", libraryModule, "-version", version, "-out", proxy)
	t.Log(strings.TrimSpace(out))

	modCache := goEnvValue(t, "GOMODCACHE")
	t.Cleanup(func() {
		for _, p := range []string{
			filepath.Join(modCache, filepath.FromSlash(libraryModule)+"@"+version),
			filepath.Join(modCache, "cache", "download", filepath.FromSlash(libraryModule), "@v"),
		} {
			removeModCacheEntries(t, p, version)
		}
	})
	upstream := goEnvValue(t, "GOPROXY")
	return []string{
		"GOPROXY=file://" + proxy + "," + upstream,
		// The version exists only here: no checksum database knows it.
		"GONOSUMDB=" + libraryModule,
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
	}, version
}

// removeModCacheEntries removes, under p, what the module cache holds of
// version: the extracted module directory (read-only, as the go command
// leaves it) or the download cache's files of that version.
func removeModCacheEntries(t *testing.T, p, version string) {
	if strings.HasSuffix(p, "@"+version) {
		filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(path, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
		return
	}
	// The list of versions seen is the go command's own note of what it
	// fetched; every version of this module in it came from such a test.
	matches, _ := filepath.Glob(filepath.Join(p, version+".*"))
	matches = append(matches, filepath.Join(p, "list"))
	for _, m := range matches {
		os.Remove(m)
	}
}

// TestFromModuleProxy gets kindtest the way its users do: from a module
// proxy that serves the module zip (which leaves out the nested modules
// under images/), into a module of their own, with no kindtest clone on the
// module path and no replace directive. There, `kindtest build` must find
// the node image that this checkout builds up to date (the inputs carried
// in the library hash like the checkout's), and a one-node cluster test
// must pass.
func TestFromModuleProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command and a cluster: not in -short mode")
	}
	enginetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()

	// The test command builds the image first; this only confirms it.
	want, err := images.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env, version := serveWorkingTree(ctx, t)

	consumer := t.TempDir()
	files := map[string]string{
		"go.mod": fmt.Sprintf("module example.com/consumer\n\ngo 1.26.0\n\nrequire %s %s\n", libraryModule, version),
		"cluster_test.go": `package consumer

import (
	"strings"
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestOneNode(t *testing.T) {
	cluster := kindtest.Start(t)
	res, err := cluster.Kubectl(t.Context(), "get", "nodes", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, " Ready ") {
		t.Fatalf("node not Ready: %s", res.Stdout)
	}
	t.Logf("nodes: %s", res.Stdout)
}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(consumer, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out := runIn(ctx, t, consumer, env, "go", "run", libraryModule+"/cmd/kindtest", "build")
	t.Logf("kindtest build from the consumer module:\n%s", out)
	if !strings.Contains(out, "node image "+want.ContentImage+" is up to date") {
		t.Errorf("build from the module proxy did not find %s up to date: the inputs carried in the library do not hash like the checkout's", want.ContentImage)
	}

	dir := strings.TrimSpace(runIn(ctx, t, consumer, env, "go", "list", "-m", "-f", "{{.Dir}}", libraryModule))
	if !strings.HasPrefix(dir, goEnvValue(t, "GOMODCACHE")) {
		t.Errorf("kindtest came from %s, not the module cache", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "images", "kubernetes", "go.mod")); err == nil {
		t.Errorf("the module zip in %s holds images/kubernetes/go.mod: not what users get", dir)
	}

	out = runIn(ctx, t, consumer, env, "go", "test", "-count=1", "-v", "./...")
	if !strings.Contains(out, "--- PASS: TestOneNode") {
		t.Errorf("one-node test from the consumer module:\n%s", out)
	}
	if testing.Verbose() {
		t.Logf("%s", bytes.TrimSpace([]byte(out)))
	}
}
