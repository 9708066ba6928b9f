package enginetest_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/kindtest"
)

// matrixTests are the library's engine tests that run on every engine of
// the matrix: node lifecycle, exec, LoadImage (single- and
// multi-platform), Kubernetes, and cleanup: after a cancelled create, by
// the sweep, and by the reaper after kill -9.
var matrixTests = []string{"TestNodeLifecycle", "TestExec", "TestLoadImagePlatforms", "TestKubernetes",
	"TestCancelMidCreateLeavesNothing", "TestPruneOrphans", "TestKilledProcessLeavesNothing"}

// TestEngineMatrix runs the library's engine tests against Debian trixie's
// Docker 26, once with the classic image store and once with the
// containerd image store. The test process runs in the engine's network
// namespace: for it, the engine is on the local host, as for a developer
// whose Docker is at /var/run/docker.sock.
func TestEngineMatrix(t *testing.T) {
	host := enginetest.Client(t)
	node := nodeImage(t, host)
	bin := buildTests(t, "./kindtest")
	for _, mode := range []struct {
		name       string
		containerd bool
	}{{"classic-store", false}, {"containerd-store", true}} {
		t.Run(mode.name, func(t *testing.T) {
			e := enginetest.StartEngine(t, host, enginetest.EngineConfig{
				ContainerdStore: mode.containerd,
				Images:          []string{node, kindtest.ReaperImage},
			})
			runTests(t, e.NetNS(), bin, []string{
				"DOCKER_HOST=" + e.Host,
				"KINDTEST_IMAGE=" + node,
				"CI=true",
			}, matrixTests)
		})
	}
}

// repoRoot is the module's root directory.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// buildTests compiles a package's tests into a binary.
func buildTests(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg)+".test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// runTests runs a compiled test binary in the network namespace netns,
// with env replacing the engine settings of the environment, and fails
// the test with the names of the tests that failed.
func runTests(t *testing.T, netns, bin string, env []string, tests []string) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net="+netns, "--", bin,
		"-test.run", runPattern(tests), "-test.count=1", "-test.v", "-test.timeout=30m")
	cmd.Dir = filepath.Join(repoRoot(t), "kindtest")
	cmd.Env = append(withoutEngineEnv(os.Environ()), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	passed, failed := scanResults(t, out)
	checkResults(t, cmd.Wait(), tests, passed, failed)
}

// runPattern is a -test.run pattern for exactly the named tests.
func runPattern(tests []string) string {
	return "^(" + strings.Join(tests, "|") + ")$"
}

// scanResults logs a test binary's -test.v output line by line and
// collects the top-level tests that passed and every test that failed.
func scanResults(t *testing.T, r io.Reader) (passed, failed []string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		t.Log(line)
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trimmed, "--- FAIL: "); ok {
			failed = append(failed, name)
		}
		if name, ok := strings.CutPrefix(trimmed, "--- PASS: "); ok && !strings.Contains(name, "/") {
			passed = append(passed, name)
		}
	}
	return passed, failed
}

// checkResults fails the test unless the run succeeded and every one of
// the tests passed: a renamed test must not drop out of the matrix
// unnoticed.
func checkResults(t *testing.T, err error, tests, passed, failed []string) {
	t.Helper()
	if err != nil || len(failed) > 0 {
		t.Fatalf("engine tests failed (%v): %s", err, strings.Join(failed, "; "))
	}
	for _, name := range tests {
		if !slices.ContainsFunc(passed, func(p string) bool { return strings.HasPrefix(p, name+" ") }) {
			t.Errorf("%s did not run (passed: %s)", name, strings.Join(passed, "; "))
		}
	}
	t.Logf("passed: %s", strings.Join(passed, "; "))
}

// withoutEngineEnv drops the variables that choose an engine.
func withoutEngineEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION", "KINDTEST_IMAGE", "CI":
			continue
		}
		out = append(out, kv)
	}
	return out
}
