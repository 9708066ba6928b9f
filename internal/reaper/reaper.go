// Package reaper removes the clusters of test processes once those
// processes are gone, however they ended: a SIGKILL or a crash included.
//
// It runs as a container of its own (see kindtest's reaper image) with the
// engine's socket mounted, one per engine, shared by the test processes
// that use that engine. Each process keeps one TCP connection to it open
// and registers on it, before creating anything, each cluster it is about
// to create. The protocol is one line each way:
//
//	reaper → client, on accept:  "kindtest-reaper 3"
//	client → reaper:             "hello SESSION"    answer "ok"
//	client → reaper:             "register NAME"    answer "ok"
//	client → reaper:             "forget NAME"      answer "ok"
//
// Ownership is per connection. When a connection closes, the reaper
// removes the clusters registered on it and not forgotten, those that
// carry the connection's session label, unless lifetime.Outlives says
// they stay for an owner that vanished; for creations the engine was still
// finishing, it sweeps them again a few seconds later, and whenever the
// engine creates an object of theirs until it has created none for a
// while. It removes nothing else: no cluster a client did not register,
// nothing of another session.
// It exits once no client has been connected for its idle time, and when
// no client connects within that time from its start, having removed
// nothing.
//
// Serve is the reaper's side. A test process's is Session (session.go),
// over one Client (client.go) at a time: when a connection is lost, it
// reaches a reaper again and registers there every cluster it holds.
package reaper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// Greeting is the line the reaper writes on every accepted connection, so
// that a client can tell the reaper (and its protocol version) from a port
// proxy that accepts for it.
const Greeting = "kindtest-reaper 3"

// DefaultSettle is when, after a client is gone, its clusters are swept
// again: the engine finishes a creation whose client has died.
var DefaultSettle = []time.Duration{time.Second, 3 * time.Second, 6 * time.Second}

// DefaultWatch is how long the reaper watches for late creations of a gone
// client's clusters after the last settle sweep, and after each one it
// saw.
var DefaultWatch = 15 * time.Second

// DefaultPoll is how often, while the reaper watches, it sweeps the gone
// client's clusters again whatever the events say: an engine may report
// no create event for some objects (rootless podman 4.3 reports none for
// networks).
var DefaultPoll = 3 * time.Second

// Config sets how patient a reaper is.
type Config struct {
	// Idle is how long the reaper waits without any client, from its
	// start or since the last one left and its clusters were removed,
	// before it exits.
	Idle time.Duration
	// Settle lists when, after a client is gone, its clusters are swept
	// again. Default DefaultSettle.
	Settle []time.Duration
	// Watch is how long, after the last settle sweep and after each
	// object of a gone client's clusters that the engine created since,
	// the reaper goes on watching for more. Default DefaultWatch.
	Watch time.Duration
	// Poll is how often the clusters are swept again while watching.
	// Default DefaultPoll.
	Poll time.Duration
	Logf func(format string, args ...any)
}

// Serve accepts clients on ln and removes their clusters when they go, as
// the package documentation says. It returns once no client is left, or
// when ctx ends.
func Serve(ctx context.Context, dc *docker.Client, ln net.Listener, cfg Config) error {
	if cfg.Idle <= 0 {
		return errors.New("reaper: idle time must be positive")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Settle == nil {
		cfg.Settle = DefaultSettle
	}
	if cfg.Watch == 0 {
		cfg.Watch = DefaultWatch
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	s := &server{dc: dc, cfg: cfg, changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go s.accept(ln)

	idle := time.NewTimer(cfg.Idle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			ln.Close()
			s.busy.Wait()
			return errors.Join(s.errs...)
		case <-s.changed:
			// A client came or went: the idle time starts again once
			// nobody is connected and nothing is being removed.
			idle.Reset(cfg.Idle)
		case <-idle.C:
			s.mu.Lock()
			if s.active > 0 {
				s.mu.Unlock()
				idle.Reset(cfg.Idle)
				continue
			}
			// From here on a new client is refused: it starts a new reaper.
			s.closing = true
			s.mu.Unlock()
			ln.Close()
			s.busy.Wait()
			cfg.Logf("reaper: no client for %v; exiting", cfg.Idle)
			return errors.Join(s.errs...)
		}
	}
}

type server struct {
	dc  *docker.Client
	cfg Config

	mu      sync.Mutex
	active  int  // clients connected, or whose clusters are being removed
	closing bool // the reaper is exiting
	busy    sync.WaitGroup
	errs    []error
	changed chan struct{}
}

func (s *server) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *server) accept(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			conn.Close()
			continue
		}
		s.active++
		s.busy.Add(1)
		s.mu.Unlock()
		s.poke()
		go s.serve(conn)
	}
}

// serve follows one client: the clusters it registers are removed when
// its connection ends.
func (s *server) serve(conn net.Conn) {
	defer s.busy.Done()
	addr := conn.RemoteAddr()
	s.cfg.Logf("reaper: client %s connected", addr)
	cl := &client{owned: map[string]bool{}}
	_ = s.converse(conn, cl)
	conn.Close()
	names := make([]string, 0, len(cl.owned))
	for n := range cl.owned {
		names = append(names, n)
	}
	s.cfg.Logf("reaper: client %s (session %s) gone; %d cluster(s) registered: %v", addr, cl.session, len(names), names)
	err := s.reapAll(cl.session, names)
	s.mu.Lock()
	if err != nil {
		s.errs = append(s.errs, err)
	}
	s.active--
	s.mu.Unlock()
	s.poke()
}

// client is what one connection has told the reaper.
type client struct {
	session string
	owned   map[string]bool
}

// converse reads the client's requests until the connection ends,
// recording its session and the clusters it registers.
func (s *server) converse(conn net.Conn, cl *client) error {
	if _, err := io.WriteString(conn, Greeting+"\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if _, err := io.WriteString(conn, cl.handle(strings.TrimSpace(line))+"\n"); err != nil {
			return err
		}
	}
}

// handle answers one request line.
func (cl *client) handle(line string) string {
	verb, arg, _ := strings.Cut(line, " ")
	if verb == "hello" {
		if strings.TrimSpace(arg) == "" || strings.ContainsAny(arg, " \t") {
			return "error hello needs one session id"
		}
		if cl.session != "" && cl.session != arg {
			return "error session already set to " + cl.session
		}
		cl.session = arg
		return "ok"
	}
	if verb != "register" && verb != "forget" {
		return fmt.Sprintf("error unknown request %q", verb)
	}
	if cl.session == "" {
		return "error say hello SESSION first"
	}
	if err := lifetime.CheckClusterName(arg); err != nil {
		return "error " + err.Error()
	}
	if verb == "register" {
		cl.owned[arg] = true
	} else {
		delete(cl.owned, arg)
	}
	return "ok"
}

// reapAll removes the clusters now, sweeps them again at each settle time,
// and, for as long as the engine goes on creating objects of theirs, again
// at each one: a creation the dead client asked for may be finished by a
// loaded engine long after the client went (7 s was seen at a load of 49).
// It watches the engine's create events until none of the clusters' has
// come for the watch time, after the last settle sweep, and sweeps every
// poll time meanwhile for what the events do not report.
func (s *server) reapAll(session string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Subscribed before the first sweep, and from a second before, so
	// that nothing created after that sweep's listing escapes.
	created := s.dc.Created(ctx, start.Add(-time.Second))
	last := map[string]error{} // each cluster's last sweep
	sweep := func(names []string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, name := range names {
			last[name] = Reap(ctx, s.dc, session, name, s.cfg.Logf)
		}
	}
	settle := append([]time.Duration{0}, s.cfg.Settle...)
	// The watch time counts from the end of the last sweep: on a loaded
	// engine a sweep itself takes seconds.
	var quiet time.Time
	calm := func() {
		if t := time.Now().Add(s.cfg.Watch); t.After(quiet) {
			quiet = t
		}
	}
	for next := 0; next < len(settle) || time.Now().Before(quiet); {
		wait := time.Until(quiet)
		polling := false
		if next < len(settle) {
			wait = time.Until(start.Add(settle[next]))
		} else if wait > s.cfg.Poll {
			wait, polling = s.cfg.Poll, true
		}
		timer := time.NewTimer(max(wait, 0))
		select {
		case <-timer.C:
			switch {
			case next < len(settle):
				sweep(names)
				next++
				if created != nil {
					calm()
				}
			case polling:
				// Not calm(): a poll finds nothing new to wait for.
				sweep(names)
			}
		case obj, ok := <-created:
			timer.Stop()
			if !ok {
				// The event stream failed: the settle sweeps are left.
				created = nil
				quiet = time.Time{}
				continue
			}
			if name := clusterOf(obj, names); name != "" {
				s.cfg.Logf("reaper: %s created after its client was gone; sweeping cluster %s again", obj, name)
				sweep([]string{name})
				calm()
			}
		}
	}
	var errs []error
	for _, name := range names {
		errs = append(errs, last[name])
	}
	return errors.Join(errs...)
}

// clusterOf returns which of the clusters object obj is of, by its name:
// kindtest names every object of a cluster after it (the network is the
// cluster's name, containers and volumes begin with it and a dash); ""
// when none. A sweep goes by labels, so a name that only looks like one
// costs a sweep and no more.
func clusterOf(obj string, names []string) string {
	for _, n := range names {
		if obj == n || strings.HasPrefix(obj, n+"-") {
			return n
		}
	}
	return ""
}

// Reap removes the resources of cluster name in session, unless the
// cluster outlives an owner that vanished.
func Reap(ctx context.Context, dc *docker.Client, session, name string, logf func(string, ...any)) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	if session == "" {
		return errors.New("reaper: empty session")
	}
	// A cluster claimed from a pool is the claiming session's, whole:
	// the pool's session no longer removes any of it, and the claimer's
	// removes the objects the pool made too.
	claimers, err := dc.LabelValues(ctx, map[string]string{lifetime.LabelCluster: name, lifetime.LabelRole: lifetime.RoleClaim}, lifetime.LabelSession)
	if err != nil {
		return err
	}
	claimed := false
	for _, s := range claimers {
		if s != session {
			logf("reaper: leaving cluster %s to session %s, which claimed it", name, s)
			return nil
		}
		claimed = true
	}
	sel := map[string]string{lifetime.LabelCluster: name, lifetime.LabelSession: session}
	keeps, err := dc.LabelValues(ctx, sel, lifetime.LabelKeep)
	if err != nil {
		return err
	}
	if len(keeps) == 0 {
		return nil
	}
	if lifetime.Outlives(keeps, lifetime.Vanished) {
		logf("reaper: keeping cluster %s (keep %v)", name, keeps)
		return nil
	}
	logf("reaper: removing cluster %s of session %s", name, session)
	if claimed {
		sel = map[string]string{lifetime.LabelCluster: name}
	}
	if err := dc.RemoveLabelled(ctx, sel); err != nil {
		return fmt.Errorf("remove cluster %s: %w", name, err)
	}
	return nil
}
