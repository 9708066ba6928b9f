// Start, the test helper: a cluster for the test, ended by the test's
// cleanup.

package kindtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// TB is the part of testing.TB that Start needs. *testing.T, *testing.B
// and Ginkgo's GinkgoT() all satisfy it.
type TB interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	TempDir() string
	Name() string
}

// Start creates a cluster for the test and registers its removal with
// t.Cleanup before creation starts, so that whatever happens next nothing
// is left behind (unless a keep policy says otherwise). Progress goes to the
// test's log. When no Docker engine answers the test is skipped, except
// when the CI environment variable is set, where that is a failure.
func Start(t TB, opts ...Option) *Cluster {
	t.Helper()
	if isGinkgo(t) {
		proc.ginkgoDriven.Store(true)
	}
	opts = append([]Option{WithLogger(LoggerFunc(t.Logf))}, opts...)
	ctx := context.Background()
	if d, ok := deadline(t); ok {
		if _, err := creationTime(time.Until(d), testTimeout()); err != nil {
			t.Fatalf("%v", err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, d.Add(-cleanupMargin), errTestDeadline)
		defer cancel()
		proc.watchDeadline(d)
	}
	c, cr, err := prepare(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrDockerUnavailable) && !inCI() {
			t.Skipf("%v (set CI=true to make this a failure)", err)
		}
		t.Fatalf("%v", err)
	}
	// The temporary directory first: cleanups run last-in first-out, so
	// it goes only after finish (and a deadline's export) wrote into it.
	c.workDir = t.TempDir()
	if c.cfg.artifactsDir == "" {
		c.cfg.artifactsDir = c.workDir
	}
	t.Cleanup(func() { c.finish(t) })
	if err := c.setup(ctx, cr); err != nil {
		t.Fatalf("kindtest: cluster %s: %v", c.name, err)
	}
	return c
}

// finish ends a cluster made by Start: logs are exported when the test
// failed or panicked, and the cluster is removed or kept as the lifetime
// rule says (see KeepPolicy and end). Every step is bounded.
func (c *Cluster) finish(t TB) {
	outcome := lifetime.Passed
	if t.Failed() || panicking() {
		outcome = lifetime.Failed
	}
	if outcome == lifetime.Failed {
		end := time.Now().Add(2 * time.Minute)
		if d, ok := deadline(t); ok && d.Add(-cleanupMargin/2).Before(end) {
			// Near the test binary's deadline: removal keeps its share
			// of the cleanup margin.
			end = d.Add(-cleanupMargin / 2)
		}
		ctx, cancel := context.WithDeadline(context.Background(), end)
		if dir, err := c.exportFailureLogs(ctx); err != nil {
			t.Logf("kindtest: %s: exporting logs: %v", c.name, err)
		} else {
			t.Logf("kindtest: %s: logs exported to %s", c.name, dir)
		}
		cancel()
	}
	removing := c.ending(outcome) == endRemove
	err := c.end(context.Background(), outcome)
	switch {
	case err != nil && removing:
		t.Logf("kindtest: %s: delete: %v", c.name, err)
		t.Fatalf("kindtest: cluster %s was not fully removed: %v", c.name, err)
	case err != nil:
		t.Logf("kindtest: %s: %v", c.name, err)
	}
}

// panicking reports whether the calling goroutine is unwinding a panic.
// A test's cleanup runs during the panic, when t.Failed() is still false
// (golang/go#49929); the panic's frames on the stack tell it instead.
func panicking() bool {
	return strings.Contains(string(debug.Stack()), "\npanic(")
}

// creationTime is how long Start may spend creating a cluster when the
// test binary's deadline is left away: all of it but cleanupMargin. When
// nothing is left it is an error that gives the numbers and what to do;
// timeout is go test's -timeout, 0 where unknown.
func creationTime(left, timeout time.Duration) (time.Duration, error) {
	budget := left - cleanupMargin
	if budget > 0 {
		return budget, nil
	}
	given := ""
	if timeout > 0 {
		given = fmt.Sprintf("go test -timeout %v: ", timeout)
	}
	return 0, fmt.Errorf("kindtest: %sthe test binary's deadline is %v away, and kindtest keeps the last %v before it for exporting logs and removing clusters: no time is left to create one; raise -timeout to %v plus the time the test needs, creating its cluster included (go test's default is -timeout 10m)",
		given, left.Round(100*time.Millisecond), cleanupMargin, cleanupMargin)
}

// testTimeout is go test's -timeout of this test binary, 0 where there is
// none or it cannot be told.
func testTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.Value.String())
	return d
}

// isGinkgo reports whether t is Ginkgo's GinkgoT().
func isGinkgo(t TB) bool {
	_, ok := t.(interface {
		ParallelProcess() int
		AttachProgressReporter(func() string) func()
	})
	return ok
}

// deadline returns the test's deadline where t can tell it (*testing.T
// can; GinkgoT cannot).
func deadline(t TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
