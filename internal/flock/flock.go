// Package flock takes exclusive locks on files: flock(2) on Unix,
// LockFileEx on Windows. Both lock an open file (not a path), so a second
// open in the same process contends like another process would, and the
// kernel drops the lock when its process ends, however it ends, so a
// crashed holder never blocks the next one. kindtest uses them for the
// claim of a run on a reusable cluster and to serialise builds of the same
// image.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kindtest/kindtest/internal/poll"
)

// Lock is a held lock; Unlock (or the process's end) releases it.
type Lock struct{ f *os.File }

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := errors.Join(unlock(l.f), l.f.Close())
	l.f = nil
	return err
}

// TryLock takes the lock on path, creating the file and its directory if
// needed, without waiting: held is false when another holder has it.
func TryLock(path string) (l *Lock, held bool, err error) {
	f, err := open(path)
	if err != nil {
		return nil, false, err
	}
	held, err = tryLock(f)
	if err != nil || !held {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("lock %s: %w", path, err)
		}
		return nil, false, nil
	}
	return &Lock{f: f}, true, nil
}

// Wait takes the lock on path, waiting while another holder has it until
// ctx ends. waiting, if not nil, is called once when Wait has to wait.
func Wait(ctx context.Context, path string, waiting func()) (*Lock, error) {
	var l *Lock
	var lockErr error
	err := poll.Until(ctx, 200*time.Millisecond, 200*time.Millisecond, func() (bool, error) {
		var held bool
		if l, held, lockErr = TryLock(path); lockErr != nil || held {
			return true, nil
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return l, lockErr
}

func open(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
