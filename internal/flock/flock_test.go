package flock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestTryLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	l, held, err := TryLock(path)
	if err != nil || !held {
		t.Fatalf("first TryLock: held %t, %v", held, err)
	}
	// flock locks belong to open file descriptions: a second open in the
	// same process contends like another process would.
	if _, held, err := TryLock(path); err != nil || held {
		t.Fatalf("second TryLock while held: held %t, %v", held, err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("second Unlock: %v", err)
	}
	l2, held, err := TryLock(path)
	if err != nil || !held {
		t.Fatalf("TryLock after Unlock: held %t, %v", held, err)
	}
	l2.Unlock()
}

func TestWaitWaitsThenTakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, _, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() {
		<-waited
		l.Unlock()
	}()
	got, err := Wait(context.Background(), path, func() { close(waited) })
	if err != nil {
		t.Fatal(err)
	}
	got.Unlock()

	held, _, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, path, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a held lock until the deadline: %v", err)
	}
}
