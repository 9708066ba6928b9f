package concurrent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestEachJoinsEveryError(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	var ran atomic.Int32
	err := Each(3, func(i int) error {
		ran.Add(1)
		return []error{a, nil, b}[i]
	})
	if ran.Load() != 3 || !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("Each = %v after %d steps, want a and b after 3", err, ran.Load())
	}
}

func TestGroupFirstErrorCancelsTheOthers(t *testing.T) {
	g, ctx := WithContext(context.Background())
	first := errors.New("first")
	started := make(chan struct{})
	g.Go(func() error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	g.Go(func() error {
		<-started
		return first
	})
	if err := g.Wait(); err != first {
		t.Fatalf("Wait = %v, want the first error only", err)
	}
}

func TestGroupWaitsForAll(t *testing.T) {
	g, ctx := WithContext(context.Background())
	var ran atomic.Int32
	for range 5 {
		g.Go(func() error { ran.Add(1); return nil })
	}
	if err := g.Wait(); err != nil || ran.Load() != 5 {
		t.Fatalf("Wait = %v after %d steps, want nil after 5", err, ran.Load())
	}
	if ctx.Err() == nil {
		t.Error("the group's context is not cancelled after Wait")
	}
}

func TestAllCancelsOnFirstError(t *testing.T) {
	boom := errors.New("boom")
	err := All(context.Background(), 4, func(ctx context.Context, i int) error {
		if i == 2 {
			return boom
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if err != boom {
		t.Fatalf("All = %v, want the failing step's error", err)
	}
}
