// Package concurrent runs independent steps at once, by one of two rules:
// Each for steps that must all run whatever the others do (removals), a
// Group for steps of which the first failure stops the rest (creation).
package concurrent

import (
	"context"
	"errors"
	"sync"
)

// Each runs fn(0) to fn(n-1) at once, waits for all, and joins their
// errors.
func Each(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Group runs steps at once, as golang.org/x/sync/errgroup does: the first
// step to fail cancels the context of the others, and Wait returns that
// first error once every step has returned. The zero Group is not usable;
// make one with WithContext.
type Group struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

// WithContext returns a Group and the context its steps must use: it is
// cancelled when a step fails or Wait returns.
func WithContext(ctx context.Context) (*Group, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	return &Group{cancel: cancel}, ctx
}

// Go runs fn in a goroutine of its own.
func (g *Group) Go(fn func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(); err != nil {
			g.once.Do(func() {
				g.err = err
				g.cancel()
			})
		}
	}()
}

// Wait waits for every step and returns the first error, or nil.
func (g *Group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}

// All is Each by the rule of a Group: it runs fn(ctx, 0) to fn(ctx, n-1)
// at once, the first failure cancelling the ctx given to the others, and
// returns that first error once all have returned.
func All(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := WithContext(ctx)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}
