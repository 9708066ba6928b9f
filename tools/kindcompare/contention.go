package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// The engine may be shared: another user's clusters running beside a
// measured one would make it slower. A watcher lists the node containers
// of clusters this comparison did not make (kindtest's, by their role
// label, less those whose owner is the kindtest process measured now;
// kind's, less the kind cluster measured now), before and during each
// run.

// watcher tracks which clusters are this comparison's own.
type watcher struct {
	mu       sync.Mutex
	kindName string // the kind cluster being measured, if any
	ktPID    int    // the kindtest process being measured, if any
	seen     []string
}

// others returns the names of running node containers that are not this
// comparison's.
func (w *watcher) others(ctx context.Context) ([]string, error) {
	out, err := command(ctx, "", nil, "docker", "ps", "--format",
		`{{.Names}}	{{.Label "dev.kindtest.role"}}	{{.Label "dev.kindtest.owner.pid"}}	{{.Label "io.x-k8s.kind.role"}}	{{.Label "io.x-k8s.kind.cluster"}}`)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 5 {
			continue
		}
		kindtestNode := f[1] != "" && (w.ktPID == 0 || f[2] != fmt.Sprint(w.ktPID))
		kindNode := f[3] != "" && f[4] != w.kindName
		if kindtestNode || kindNode {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// during polls every 2 s while fn runs and returns fn's error and the
// other clusters' nodes seen meanwhile.
func (w *watcher) during(ctx context.Context, fn func() error) ([]string, error) {
	w.mu.Lock()
	w.seen = nil
	w.mu.Unlock()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if names, err := w.others(ctx); err == nil && len(names) > 0 {
				w.mu.Lock()
				for _, n := range names {
					if !slices.Contains(w.seen, n) {
						w.seen = append(w.seen, n)
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Second):
			}
		}
	})
	err := fn()
	close(done)
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen, err
}

// waitQuiet waits until no other cluster's node has run for quiet, or
// gives up after limit and says so.
func (w *watcher) waitQuiet(ctx context.Context, quiet, limit time.Duration) error {
	start := time.Now()
	lastBusy := time.Now().Add(-quiet)
	announced := false
	for {
		names, err := w.others(ctx)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			lastBusy = time.Now()
			if !announced {
				fmt.Printf("  waiting: other clusters run on the engine (%s)\n", strings.Join(names, ", "))
				announced = true
			}
		}
		if time.Since(lastBusy) >= quiet {
			return nil
		}
		if time.Since(start) > limit {
			fmt.Printf("  gave up waiting after %v: measuring beside them\n", limit)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
