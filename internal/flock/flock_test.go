package flock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// holderLock keeps the holder process's lock from the garbage collector.
var holderLock *Lock

// TestMain lets the test binary act as another process that holds a lock:
// with FLOCK_TEST_HOLD set it takes the lock on that path, says so on
// stdout and waits until it is killed.
func TestMain(m *testing.M) {
	if path := os.Getenv("FLOCK_TEST_HOLD"); path != "" {
		l, held, err := TryLock(path)
		if err != nil || !held {
			fmt.Printf("not held: %t %v\n", held, err)
			os.Exit(1)
		}
		holderLock = l // reachable: a collected *os.File is closed, and the lock with it
		fmt.Println("held")
		// Until killed. Not select {}: with no other goroutine the
		// runtime ends that as a deadlock at once, dropping the lock,
		// and the test raced the holder's exit.
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(m.Run())
}

// TestLockIsDroppedWhenTheHolderDies: another process's lock excludes this
// one, and its death (a kill, no cleanup) frees the lock for the next
// holder. The path has spaces, as a macOS or Windows home directory may.
func TestLockIsDroppedWhenTheHolderDies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "with space", "Application Support", "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FLOCK_TEST_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("holder process: %q, %v", line, err)
	}
	if _, held, err := TryLock(path); err != nil || held {
		t.Fatalf("TryLock while another process holds the lock: held %t, %v", held, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := Wait(ctx, path, nil)
	if err != nil {
		t.Fatalf("lock after its holder was killed: %v", err)
	}
	l.Unlock()
}

func TestTryLockReportsWhatFailed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	// A regular file where the lock's directory should be.
	path := filepath.Join(file, "x.lock")
	_, held, err := TryLock(path)
	if err == nil || held || !strings.Contains(err.Error(), path) {
		t.Fatalf("TryLock under a file: held %t, %v; want an error naming %s", held, err, path)
	}
}
