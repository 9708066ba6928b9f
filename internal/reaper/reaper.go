// Package reaper removes a test process's clusters once that process is
// gone, however it ended: a SIGKILL or a crash included.
//
// It runs as a container of its own (see kindtest's reaper image), one per
// test process, with the engine's socket mounted. The process keeps one
// TCP connection to it open and registers on it, before creating anything,
// each cluster it is about to create. The protocol is one line each way:
//
//	reaper → client, on accept:  "kindtest-reaper 2"
//	client → reaper:             "register NAME"   answer "ok"
//	client → reaper:             "forget NAME"     answer "ok"
//
// When a connection closes, the reaper removes the clusters registered on
// it and not forgotten, unless lifetime.Outlives says they stay for an
// owner that vanished; it sweeps them again a few seconds later, for
// creations the engine was still finishing. It removes nothing else: no
// cluster it was not told of, nothing of another session. It exits once
// no client is connected and nothing is left to do, and when no client
// connects within its first-client wait, having removed nothing.
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
const Greeting = "kindtest-reaper 2"

// DefaultSettle is when, after a client is gone, its clusters are swept
// again: the engine finishes a creation whose client has died.
var DefaultSettle = []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}

// Config sets what a reaper watches and how patiently.
type Config struct {
	// Session is the session label of every resource it may remove.
	Session string
	// FirstClient bounds the wait for the first connection.
	FirstClient time.Duration
	// Settle lists when, after a client is gone, its clusters are swept
	// again. Default DefaultSettle.
	Settle []time.Duration
	Logf   func(format string, args ...any)
}

// Serve accepts clients on ln and removes their clusters when they go, as
// the package documentation says. It returns once no client is left, or
// when ctx ends.
func Serve(ctx context.Context, dc *docker.Client, ln net.Listener, cfg Config) error {
	if cfg.Session == "" {
		return errors.New("reaper: no session to watch")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Settle == nil {
		cfg.Settle = DefaultSettle
	}
	s := &server{dc: dc, cfg: cfg, idle: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go s.accept(ln)

	first := time.NewTimer(cfg.FirstClient)
	defer first.Stop()
	select {
	case <-first.C:
		s.mu.Lock()
		never := !s.seen
		s.mu.Unlock()
		if never {
			cfg.Logf("reaper: no client within %v; exiting, nothing removed", cfg.FirstClient)
			return nil
		}
		<-s.idle
	case <-s.idle:
	case <-ctx.Done():
	}
	// Wait for every client's reaping to finish.
	s.wg.Wait()
	return errors.Join(s.errs...)
}

type server struct {
	dc  *docker.Client
	cfg Config

	mu      sync.Mutex
	seen    bool // a client has connected
	clients int  // connected now
	wg      sync.WaitGroup
	errs    []error
	idle    chan struct{} // signalled when the last client's work is done
}

func (s *server) accept(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.seen = true
		s.clients++
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn)
	}
}

// serve follows one client: the clusters it registers are removed when
// its connection ends.
func (s *server) serve(conn net.Conn) {
	defer s.wg.Done()
	addr := conn.RemoteAddr()
	s.cfg.Logf("reaper: client %s connected", addr)
	owned := map[string]bool{}
	_ = s.converse(conn, owned)
	conn.Close()
	names := make([]string, 0, len(owned))
	for n := range owned {
		names = append(names, n)
	}
	s.cfg.Logf("reaper: client %s gone; %d cluster(s) registered: %v", addr, len(names), names)
	err := s.reapAll(names)
	s.mu.Lock()
	if err != nil {
		s.errs = append(s.errs, err)
	}
	s.clients--
	last := s.clients == 0
	s.mu.Unlock()
	if last {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

// converse reads the client's requests until the connection ends,
// recording in owned the clusters it registers.
func (s *server) converse(conn net.Conn, owned map[string]bool) error {
	if _, err := io.WriteString(conn, Greeting+"\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		verb, name, _ := strings.Cut(strings.TrimSpace(line), " ")
		reply := "ok"
		if err := lifetime.CheckClusterName(name); err != nil {
			reply = "error " + err.Error()
		} else {
			switch verb {
			case "register":
				owned[name] = true
			case "forget":
				delete(owned, name)
			default:
				reply = fmt.Sprintf("error unknown request %q", verb)
			}
		}
		if _, err := io.WriteString(conn, reply+"\n"); err != nil {
			return err
		}
	}
}

// reapAll removes the clusters now, then sweeps them again at each settle
// time.
func (s *server) reapAll(names []string) error {
	if len(names) == 0 {
		return nil
	}
	start := time.Now()
	var errs []error
	for i, at := range append([]time.Duration{0}, s.cfg.Settle...) {
		time.Sleep(time.Until(start.Add(at)))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var round []error
		for _, name := range names {
			if err := Reap(ctx, s.dc, s.cfg.Session, name, s.cfg.Logf); err != nil {
				round = append(round, err)
			}
		}
		cancel()
		// Only the last round's failures stand: a later round retries.
		if i == len(s.cfg.Settle) {
			errs = round
		}
	}
	return errors.Join(errs...)
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
	if err := dc.RemoveLabelled(ctx, sel); err != nil {
		return fmt.Errorf("remove cluster %s: %w", name, err)
	}
	return nil
}
