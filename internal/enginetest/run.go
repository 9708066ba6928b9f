package enginetest

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
)

// Running the library's own tests elsewhere: a compiled test binary run in
// another network namespace or container, its verbose output logged and
// its results checked test by test.

// RepoRoot is the module's root directory.
func RepoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildTests compiles a package's tests into a binary.
func BuildTests(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg)+".test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// RunTests runs a compiled test binary in the network namespace netns,
// with env replacing the engine settings of the environment, and fails
// the test with the names of the tests that failed.
func RunTests(t testing.TB, netns, bin string, env []string, tests []string) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net="+netns, "--", bin,
		"-test.run", RunPattern(tests), "-test.count=1", "-test.v", "-test.timeout=30m")
	cmd.Dir = filepath.Join(RepoRoot(t), "kindtest")
	cmd.Env = append(WithoutEngineEnv(os.Environ()), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	passed, failed := ScanResults(t, out)
	CheckResults(t, cmd.Wait(), tests, passed, failed)
}

// RunPattern is a -test.run pattern for exactly the named tests.
func RunPattern(tests []string) string {
	return "^(" + strings.Join(tests, "|") + ")$"
}

// ScanResults logs a test binary's -test.v output line by line and
// collects the top-level tests that passed and every test that failed.
func ScanResults(t testing.TB, r io.Reader) (passed, failed []string) {
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

// CheckResults fails the test unless the run succeeded and every one of
// the tests passed: a renamed test must not drop out of the matrix
// unnoticed.
func CheckResults(t testing.TB, err error, tests, passed, failed []string) {
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

// WithoutEngineEnv drops the variables that choose an engine.
func WithoutEngineEnv(env []string) []string {
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

// BuildStaticTests compiles a package's tests into a static binary that
// runs in any Linux container.
func BuildStaticTests(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg)+".test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c %s: %v\n%s", pkg, err, out)
	}
	return bin
}
