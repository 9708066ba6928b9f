// Package lb is the TCP load balancer in front of a cluster's control
// planes: it accepts connections on one address and relays each to the
// next backend that is up, round robin, skipping backends that a health
// check or a failed dial found down.
package lb

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what Serve balances.
type Config struct {
	// Backends are HOST:PORT addresses (names are resolved at each dial:
	// a stopped container's name stops resolving).
	Backends []string
	// DialTimeout bounds one dial of a backend. Default 1 s.
	DialTimeout time.Duration
	// CheckInterval is how often every backend is dialled to see whether
	// it is up. Default 1 s.
	CheckInterval time.Duration
	// Logf, when set, reports backends going up or down.
	Logf func(format string, args ...any)
}

type backend struct {
	addr string
	up   atomic.Bool
}

// Serve accepts connections on ln until ctx ends, relaying each to a
// backend.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	if len(cfg.Backends) == 0 {
		return errors.New("lb: no backends")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	bs := make([]*backend, len(cfg.Backends))
	for i, a := range cfg.Backends {
		// Optimistic until checked: the first connections need not wait.
		bs[i] = &backend{addr: a}
		bs[i].up.Store(true)
	}
	b := &balancer{cfg: cfg, backends: bs}
	go b.check(ctx)
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); b.relay(ctx, conn) }()
	}
}

type balancer struct {
	cfg      Config
	backends []*backend
	next     atomic.Uint64
}

// check dials every backend each interval and records which answer.
func (b *balancer) check(ctx context.Context) {
	t := time.NewTicker(b.cfg.CheckInterval)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, be := range b.backends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", be.addr, b.cfg.DialTimeout)
				if err == nil {
					c.Close()
				}
				b.mark(be, err == nil)
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *balancer) mark(be *backend, up bool) {
	if be.up.Swap(up) != up {
		state := "down"
		if up {
			state = "up"
		}
		b.cfg.Logf("backend %s is %s", be.addr, state)
	}
}

// dial connects to the next backend that is up, round robin; when none
// is known up, it tries every backend, in case all came up since the
// last check.
func (b *balancer) dial() (net.Conn, error) {
	n := len(b.backends)
	start := int(b.next.Add(1) % uint64(n))
	var errs []error
	for pass := 0; pass < 2; pass++ {
		for i := range n {
			be := b.backends[(start+i)%n]
			if pass == 0 && !be.up.Load() {
				continue
			}
			c, err := net.DialTimeout("tcp", be.addr, b.cfg.DialTimeout)
			if err == nil {
				b.mark(be, true)
				return c, nil
			}
			b.mark(be, false)
			errs = append(errs, err)
		}
	}
	return nil, errors.Join(errs...)
}

func (b *balancer) relay(ctx context.Context, in net.Conn) {
	defer in.Close()
	out, err := b.dial()
	if err != nil {
		b.cfg.Logf("no backend for %s: %v", in.RemoteAddr(), err)
		return
	}
	defer out.Close()
	stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
	defer stop()
	// The first direction to end ends both: a backend that went away
	// without a word would otherwise hold the other direction forever.
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	in.Close()
	out.Close()
	<-done
}
