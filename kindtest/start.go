package kindtest

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"
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

// cleanupMargin is the time kept back from the test binary's -timeout for
// removing clusters before the deadline panic ends the process.
const cleanupMargin = 30 * time.Second

// Start creates a cluster for the test and registers its removal with
// t.Cleanup before creation starts, so that whatever happens next nothing
// is left behind (unless a keep policy says otherwise). Progress goes to the
// test's log. When no Docker engine answers the test is skipped, except
// when the CI environment variable is set, where that is a failure.
func Start(t TB, opts ...Option) *Cluster {
	t.Helper()
	opts = append([]Option{WithLogger(LoggerFunc(t.Logf))}, opts...)
	ctx := context.Background()
	if d, ok := deadline(t); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-cleanupMargin))
		defer cancel()
		watchDeadline(d)
	}
	c, err := prepare(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrDockerUnavailable) && os.Getenv("CI") == "" {
			t.Skipf("%v (set CI=true to make this a failure)", err)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { c.finish(t) })
	c.workDir = t.TempDir()
	if c.cfg.artifactsDir == "" {
		c.cfg.artifactsDir = c.workDir
	}
	if err := c.setup(ctx); err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// finish ends a cluster made by Start: logs are exported when the test
// failed, and the cluster is removed unless the keep policy says otherwise.
func (c *Cluster) finish(t TB) {
	failed := t.Failed()
	if failed {
		if dir, err := c.ExportLogs(context.Background(), c.cfg.artifactsDir); err != nil {
			t.Logf("kindtest: %s: exporting logs: %v", c.name, err)
		} else {
			t.Logf("kindtest: %s: logs exported to %s", c.name, dir)
		}
	}
	if c.cfg.reuse && c.ready {
		if err := c.release(context.Background()); err != nil {
			t.Logf("kindtest: %s: %v", c.name, err)
		}
		return
	}
	if c.cfg.keep == KeepAlways || (failed && c.cfg.keep == KeepOnFailure) {
		unregister(c)
		t.Logf("kindtest: keeping cluster %s (keep policy %s): %s", c.name, c.cfg.keep, c.inspectHint())
		return
	}
	if err := c.remove(context.Background()); err != nil {
		t.Logf("kindtest: %s: delete: %v", c.name, err)
		t.Fatalf("kindtest: cluster %s was not fully removed: %v", c.name, err)
	}
}

var deadlineOnce sync.Once

// watchDeadline removes every live cluster shortly before the test binary's
// -timeout deadline: at the deadline the testing package panics and the
// process ends without running any cleanup.
func watchDeadline(d time.Time) {
	deadlineOnce.Do(func() {
		time.AfterFunc(time.Until(d.Add(-cleanupMargin/2)), func() {
			deleteAllLive(cleanupMargin / 2)
		})
	})
}

// deadline returns the test's deadline where t can tell it (*testing.T
// can; GinkgoT cannot).
func deadline(t TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
