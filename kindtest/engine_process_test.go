package kindtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// goTest runs `go test -v` on packages of this module as a separate run,
// the way a user would, and returns its output.
func goTest(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	return goTestQuiet(t, env, append([]string{"-v"}, args...)...)
}

// goTestQuiet is goTest without -v: a test's log is printed only when
// the test ends.
func goTestQuiet(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-count=1"}, args...)...)
	cmd.Dir = ".." // the module root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("go test %s:\n%s", strings.Join(args, " "), out)
	return string(out), err
}

func TestParallelPackages(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	out, err := goTest(t, nil, "-p", "3",
		"./kindtest/testdata/parallel/a", "./kindtest/testdata/parallel/b", "./kindtest/testdata/parallel/c")
	if err != nil {
		t.Fatalf("three packages in parallel: %v", err)
	}
	re := regexp.MustCompile(`PARALLEL cluster=(\S+) api=(\S+) kubeconfig=(\S+)`)
	matches := re.FindAllStringSubmatch(out, -1)
	if len(matches) != 3 {
		t.Fatalf("found %d clusters in the output, want 3", len(matches))
	}
	for col, what := range []string{"name", "API server address", "kubeconfig path"} {
		seen := map[string]bool{}
		for _, m := range matches {
			if seen[m[col+1]] {
				t.Errorf("two packages share the %s %s", what, m[col+1])
			}
			seen[m[col+1]] = true
		}
	}
	for _, m := range matches {
		if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: m[1]}); n != 0 {
			t.Errorf("cluster %s: %d resources left", m[1], n)
		}
	}
}

func TestGinkgoParallel(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "github.com/onsi/ginkgo/v2/ginkgo", "-p", "--procs=3", "-v", "./examples/ginkgo-parallel")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	t.Logf("ginkgo -p:\n%s", out)
	if err != nil {
		t.Fatalf("ginkgo -p: %v", err)
	}
	names := regexp.MustCompile(`creating cluster (\S+)`).FindAllStringSubmatch(string(out), -1)
	if len(names) != 1 {
		t.Fatalf("%d clusters created, want one shared by all processes", len(names))
	}
	if !strings.Contains(string(out), "Ran 4 of 4 Specs") {
		t.Errorf("not every spec ran")
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: names[0][1]}); n != 0 {
		t.Errorf("shared cluster %s: %d resources left after the suite", names[0][1], n)
	}
	// Every process's attached handle had a kubeconfig of its own.
	if dirs := workDirsOf(t, names[0][1]); len(dirs) != 0 {
		t.Errorf("shared cluster %s: kubeconfig directories left after the suite: %q", names[0][1], dirs)
	}
}

// TestTestTimeout: a test that runs into go test's -timeout with a
// cluster up has its logs exported and its cluster removed before the
// deadline panic ends the process.
func TestTestTimeout(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	artifacts := t.TempDir()
	// Without the reaper, only the harness itself can have removed the
	// cluster by the time the process ends. Without -v the test's log is
	// lost in the panic: the export is said on standard error too.
	out, err := goTestQuiet(t, []string{"KINDTEST_REAPER=off", "ARTIFACTS=" + artifacts}, "-timeout", "45s", "./kindtest/testdata/timeout")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(out, "test timed out") {
		t.Fatalf("want the child run to hit its -timeout: %v", err)
	}
	m := regexp.MustCompile(`TIMEOUT cluster=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the child did not get to create its cluster")
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: m[1]}); n != 0 {
		t.Errorf("cluster %s: %d resources left after the -timeout panic", m[1], n)
	}
	if !strings.Contains(out, "logs exported to "+filepath.Join(artifacts, m[1])) {
		t.Error("the child did not say where its logs were exported")
	}
	for _, node := range []string{m[1] + "-control-plane"} {
		for _, f := range []string{"inspect.json", "console.log", "journal.log"} {
			if fi, err := os.Stat(filepath.Join(artifacts, m[1], node, f)); err != nil || fi.Size() == 0 {
				t.Errorf("exported logs: %s of %s: %v", f, node, err)
			}
		}
	}
}

// TestShortTestTimeout: under a go test -timeout shorter than the cleanup
// margin, Start fails at once saying so, with the numbers and what to do.
// Nothing of an engine is needed to tell.
func TestShortTestTimeout(t *testing.T) {
	out, err := goTest(t, nil, "-timeout", "25s", "./kindtest/testdata/shorttimeout")
	if err == nil || strings.Contains(out, "SHORTTIMEOUT:") {
		t.Fatalf("Start did not fail under -timeout 25s: %v", err)
	}
	for _, w := range []string{"go test -timeout 25s", "keeps the last 30s before it", "raise -timeout"} {
		if !strings.Contains(out, w) {
			t.Errorf("the child's output lacks %q", w)
		}
	}
	if strings.Contains(out, "test timed out") {
		t.Error("the child ran into its -timeout instead of failing at once")
	}
}
