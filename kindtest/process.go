// The process's own state, all in one value: its session and owner, its
// session with the reaper, its live clusters, and the watchers that end
// them (SIGINT and SIGTERM where no reaper watches, the test binary's
// deadline).

package kindtest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/interrupt"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/reaper"
)

// process is what kindtest keeps for the life of the test process; proc is
// the one instance.
type process struct {
	sessionOnce sync.Once
	session     string // see Session
	owner       Owner  // this process, as cluster labels name it

	// reaperName is the engine's reaper container this process uses (see
	// defaultReaperName).
	reaperName string
	// The session with the engine's reapers, made by the first cluster
	// that needs it (see processReaper). Keeping it here also keeps its
	// connections referenced for the life of the process: were one
	// finalized and closed, its reaper would remove live clusters.
	reaperOnce  sync.Once
	reaperReady chan struct{}
	reaper      *reaper.Session
	reaperErr   error

	// live are the clusters this process made and has not yet ended, for
	// the test binary's deadline and, where no reaper watches, for
	// SIGINT and SIGTERM.
	liveMu sync.Mutex
	live   map[*Cluster]struct{}

	signalOnce   sync.Once
	deadlineOnce sync.Once
	sweepOnce    sync.Once // see sweepOrphans
	// ginkgoDriven is set once a Ginkgo suite has called Start: Ginkgo
	// handles SIGINT and SIGTERM itself and runs Start's cleanup
	// (DeferCleanup) when interrupted.
	ginkgoDriven atomic.Bool
}

var proc = &process{
	reaperName:  defaultReaperName,
	reaperReady: make(chan struct{}),
	live:        map[*Cluster]struct{}{},
}

// Session returns this process's session id: KINDTEST_SESSION when set, else
// a random id made once per process. Every resource the process creates is
// labelled with it. Set KINDTEST_SESSION to group the clusters of several
// processes (a CI job's, say) under one label value for your own tooling;
// ownership stays per process: each process has its own reaper, which
// removes only the clusters that process registered with it.
func Session() string {
	proc.initSession()
	return proc.session
}

// self is this process as the owner of its clusters.
func self() Owner {
	proc.initSession()
	return proc.owner
}

func (p *process) initSession() {
	p.sessionOnce.Do(func() {
		p.session = getenv(envSession)
		if p.session == "" {
			p.session = strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		}
		host, _ := os.Hostname()
		start, _ := lifetime.ProcessStart(os.Getpid())
		p.owner = Owner{Host: host, PID: os.Getpid(), Start: start}
	})
}

func (p *process) register(c *Cluster) {
	p.liveMu.Lock()
	p.live[c] = struct{}{}
	p.liveMu.Unlock()
}

func (p *process) unregister(c *Cluster) {
	p.liveMu.Lock()
	delete(p.live, c)
	p.liveMu.Unlock()
}

// logLive writes a line of the process's reaper session to the log of
// every live cluster: the clusters it is about.
func (p *process) logLive(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	p.liveMu.Lock()
	defer p.liveMu.Unlock()
	for c := range p.live {
		c.log.Printf("kindtest: %s: %s", c.name, line)
	}
}

// watchSignals is called only when a cluster has no reaper watching it.
// It ends the process's clusters on SIGINT or SIGTERM, then lets the
// signal have its default effect. A library must coexist with the rest of
// the process, so it never calls signal.Reset (which would remove every
// other handler) and, on Unix, never exits the process itself: once the
// clusters are gone it stops relaying the signal and raises it again. (On
// Windows a console event cannot be raised again: the process exits with
// the code that event gives it; see internal/interrupt.) Under Ginkgo it
// does nothing: Ginkgo's interrupt handling runs Start's cleanup, and a
// second signal would cut that short.
//
// With a reaper watching (the usual case) no handler is installed at all:
// the signal ends the process as it would without kindtest, and the
// reaper removes the clusters within seconds.
func (p *process) watchSignals() {
	if p.ginkgoDriven.Load() {
		return
	}
	p.signalOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, interrupt.Signals()...)
		go func() {
			sig := <-ch
			p.endAllLive(lifetime.Interrupted, time.Minute)
			signal.Stop(ch)
			interrupt.Raise(sig)
		}()
	})
}

// cleanupMargin is the time kept back from the test binary's -timeout for
// removing clusters before the deadline panic ends the process.
const cleanupMargin = 30 * time.Second

// watchDeadline ends every live cluster in the cleanup margin before the
// test binary's -timeout deadline d: at d the testing package panics and
// the process ends without running any cleanup. A test that hits the
// deadline has failed: its logs are exported, as at the end of a failed
// test, in the first half of the margin, and KeepOnFailure keeps its
// cluster; removal has the rest, less a second.
func (p *process) watchDeadline(d time.Time) {
	p.deadlineOnce.Do(func() {
		time.AfterFunc(time.Until(d.Add(-cleanupMargin)), func() {
			p.exportAllLive(d.Add(-cleanupMargin / 2))
			p.endAllLive(lifetime.Failed, time.Until(d)-time.Second)
		})
	})
}

// exportAllLive exports the logs of every live cluster made by Start, in
// parallel, by the given time. Where they went is also written to
// standard error: the testing package prints no log of a test that is
// still running when the deadline panic ends the process (unless -v).
func (p *process) exportAllLive(by time.Time) {
	p.liveMu.Lock()
	cs := make([]*Cluster, 0, len(p.live))
	for c := range p.live {
		if c.cfg.artifactsDir != "" {
			cs = append(cs, c)
		}
	}
	p.liveMu.Unlock()
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

// endAllLive ends every live cluster in parallel within timeout, as end
// decides for the outcome.
func (p *process) endAllLive(o lifetime.Outcome, timeout time.Duration) {
	p.liveMu.Lock()
	cs := make([]*Cluster, 0, len(p.live))
	for c := range p.live {
		cs = append(cs, c)
	}
	p.liveMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = concurrent.Each(len(cs), func(i int) error {
		c := cs[i]
		if c.ending(o) == endRemove {
			c.log.Printf("kindtest: %s: removing cluster before the process ends (%s)", c.name, o)
		}
		return c.end(ctx, o)
	})
}

// Owner identifies the process that created a cluster: host name, PID and
// the process's start time, so that a recycled PID is not taken for the
// owner.
type Owner struct {
	Host  string
	PID   int
	Start string
}

// String formats the owner as host/pid.
func (o Owner) String() string { return fmt.Sprintf("%s/%d", o.Host, o.PID) }

// ownerAlive reports whether the process o still runs on this host. An owner
// on another host is assumed alive: only its own host can tell.
func ownerAlive(o Owner) bool { return lifetime.OwnerAlive(o.Host, o.PID, o.Start) }
