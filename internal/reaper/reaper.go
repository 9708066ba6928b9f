// Package reaper removes a test session's clusters once the test process
// that owns them is gone, however it ended: a SIGKILL or a crash included.
//
// It runs as a container of its own next to the clusters (see kindtest's
// reaper image), with the engine's socket mounted. The test process keeps
// one TCP connection to it open; when the last connection has been closed
// for the grace period, the reaper removes every cluster of the session
// that is not marked to be kept, and exits.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// Ready is the line the reaper writes on every accepted connection, so that
// a client can tell the reaper from a port proxy that accepts for it.
const Ready = "kindtest-reaper ready\n"

// Labels the reaper reads; they match those kindtest puts on resources.
const (
	labelCluster = "dev.kindtest.cluster"
	labelSession = "dev.kindtest.session"
	labelKeep    = "dev.kindtest.keep"
)

// Config sets what a reaper watches and how patiently.
type Config struct {
	Session string
	// Grace is how long no client may be connected before the reaper acts.
	Grace time.Duration
	// FirstClient bounds the wait for the first connection.
	FirstClient time.Duration
	Logf        func(format string, args ...any)
}

// Serve accepts connections on ln until no client has been connected for
// cfg.Grace, then removes the session's clusters and returns.
func Serve(ctx context.Context, dc *docker.Client, ln net.Listener, cfg Config) error {
	if cfg.Session == "" {
		return errors.New("reaper: no session to watch")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	var mu sync.Mutex
	clients := 0
	idle := time.NewTimer(cfg.FirstClient)
	defer idle.Stop()
	done := make(chan struct{})
	go func() {
		select {
		case <-idle.C:
		case <-ctx.Done():
		}
		close(done)
		ln.Close()
	}()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			clients++
			idle.Stop()
			mu.Unlock()
			cfg.Logf("reaper: client %s connected", conn.RemoteAddr())
			go func() {
				defer conn.Close()
				_, _ = io.WriteString(conn, Ready)
				// Whatever the client sends is ignored; EOF or an error
				// means it is gone.
				_, _ = io.Copy(io.Discard, conn)
				mu.Lock()
				clients--
				if clients == 0 {
					idle.Reset(cfg.Grace)
				}
				mu.Unlock()
				cfg.Logf("reaper: client %s gone", conn.RemoteAddr())
			}()
		}
	}()
	<-done
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	// A creation request the dead process sent may still complete after
	// the first sweep; a second one a moment later catches it.
	err := Reap(cctx, dc, cfg.Session, cfg.Logf)
	time.Sleep(3 * time.Second)
	return errors.Join(err, Reap(cctx, dc, cfg.Session, cfg.Logf))
}

// Reap removes every cluster of the session that is not marked to be kept.
func Reap(ctx context.Context, dc *docker.Client, session string, logf func(string, ...any)) error {
	sel := map[string]string{labelSession: session, labelCluster: ""}
	clusters := map[string]bool{}
	keep := func(l map[string]string) {
		if l[labelKeep] == "" || l[labelKeep] == "never" {
			clusters[l[labelCluster]] = true
		}
	}
	cs, err := dc.ListContainers(ctx, sel)
	if err != nil {
		return err
	}
	for _, c := range cs {
		keep(c.Labels)
	}
	vs, err := dc.ListVolumes(ctx, sel)
	if err != nil {
		return err
	}
	for _, v := range vs {
		keep(v.Labels)
	}
	ns, err := dc.ListNetworks(ctx, sel)
	if err != nil {
		return err
	}
	for _, n := range ns {
		keep(n.Labels)
	}
	var errs []error
	for name := range clusters {
		logf("reaper: removing cluster %s of session %s", name, session)
		if err := dc.RemoveLabelled(ctx, map[string]string{labelCluster: name}); err != nil {
			errs = append(errs, fmt.Errorf("remove cluster %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
