package kindtest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// The clusters this process has and has not yet deleted, for the test
// binary's deadline and, where no reaper watches, for SIGINT and SIGTERM.
var (
	liveMu sync.Mutex
	live   = map[*Cluster]struct{}{}
)

func register(c *Cluster) {
	liveMu.Lock()
	live[c] = struct{}{}
	liveMu.Unlock()
}

func unregister(c *Cluster) {
	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
}

var (
	signalOnce sync.Once
	// ginkgoDriven is set once a Ginkgo suite has called Start: Ginkgo
	// handles SIGINT and SIGTERM itself and runs Start's cleanup
	// (DeferCleanup) when interrupted.
	ginkgoDriven atomic.Bool
)

// watchSignals is called only when a cluster has no reaper watching it.
// It removes the process's clusters on SIGINT or SIGTERM, then lets the
// signal have its default effect. A library must coexist with the rest of
// the process, so it never calls signal.Reset (which would remove every
// other handler) and never exits the process itself: once the clusters are
// gone it stops relaying the signal and raises it again. Under Ginkgo it
// does nothing: Ginkgo's interrupt handling runs Start's cleanup, and a
// second signal would cut that short.
//
// With a reaper watching (the usual case) no handler is installed at all:
// the signal ends the process as it would without kindtest, and the
// reaper removes the clusters within seconds.
func watchSignals() {
	if ginkgoDriven.Load() {
		return
	}
	signalOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			endAllLive(lifetime.Interrupted, time.Minute)
			signal.Stop(ch)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		}()
	})
}

// endAllLive ends every live cluster in parallel within timeout, as
// lifetime.Outlives says for the outcome: each is removed or kept.
func endAllLive(o lifetime.Outcome, timeout time.Duration) {
	liveMu.Lock()
	cs := make([]*Cluster, 0, len(live))
	for c := range live {
		cs = append(cs, c)
	}
	liveMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = concurrent.Each(len(cs), func(i int) error {
		c := cs[i]
		if c.outlives(o) {
			return c.keepFor(ctx, o)
		}
		c.log.Printf("kindtest: %s: removing cluster before the process ends (%s)", c.name, o)
		return c.remove(ctx)
	})
}

var deadlineOnce sync.Once

// watchDeadline ends every live cluster in the cleanup margin before the
// test binary's -timeout deadline d: at d the testing package panics and
// the process ends without running any cleanup. A test that hits the
// deadline has failed: its logs are exported, as at the end of a failed
// test, in the first half of the margin, and KeepOnFailure keeps its
// cluster; removal has the rest, less a second.
func watchDeadline(d time.Time) {
	deadlineOnce.Do(func() {
		time.AfterFunc(time.Until(d.Add(-cleanupMargin)), func() {
			exportAllLive(d.Add(-cleanupMargin / 2))
			endAllLive(lifetime.Failed, time.Until(d)-time.Second)
		})
	})
}

// exportAllLive exports the logs of every live cluster made by Start, in
// parallel, by the given time. Where they went is also written to
// standard error: the testing package prints no log of a test that is
// still running when the deadline panic ends the process (unless -v).
func exportAllLive(by time.Time) {
	liveMu.Lock()
	cs := make([]*Cluster, 0, len(live))
	for c := range live {
		if c.cfg.artifactsDir != "" {
			cs = append(cs, c)
		}
	}
	liveMu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	_ = concurrent.Each(len(cs), func(i int) error {
		c := cs[i]
		line := fmt.Sprintf("kindtest: %s: the test binary's deadline is %v away: ", c.name, cleanupMargin)
		if dir, err := c.exportFailureLogs(ctx); err != nil {
			line += fmt.Sprintf("exporting logs: %v", err)
		} else {
			line += "logs exported to " + dir
		}
		c.log.Printf("%s", line)
		fmt.Fprintln(os.Stderr, line)
		return nil
	})
}

// panicking reports whether the calling goroutine is unwinding a panic.
// A test's cleanup runs during the panic, when t.Failed() is still false
// (golang/go#49929); the panic's frames on the stack tell it instead.
func panicking() bool {
	return strings.Contains(string(debug.Stack()), "\npanic(")
}
