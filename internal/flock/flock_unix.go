//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock(2) lock on f without waiting; held is
// false when another open file holds it.
func tryLock(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// unlock is a no-op: closing f releases a flock(2) lock at once.
func unlock(*os.File) error { return nil }
