// Start, the test helper: a cluster for the test, ended by the test's
// cleanup.

package kindtest

import (
	"context"
	"errors"
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
	var testDeadline time.Time
	if d, ok := deadline(t); ok {
		var cancel context.CancelFunc
		testDeadline = d.Add(-cleanupMargin)
		ctx, cancel = context.WithDeadline(ctx, testDeadline)
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
	cr.deadline = testDeadline
	t.Cleanup(func() { c.finish(t) })
	c.workDir = t.TempDir()
	if c.cfg.artifactsDir == "" {
		c.cfg.artifactsDir = c.workDir
	}
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if dir, err := c.ExportLogs(ctx, c.cfg.artifactsDir); err != nil {
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
