package reaper

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeReaper greets each connection with greeting and answers each line
// with answer(line). It checks the client's side of the protocol only;
// the reaper's own tests check Serve.
func fakeReaper(t *testing.T, greeting string, answer func(string) string) string {
	t.Helper()
	return slowReaper(t, 0, greeting, answer)
}

// slowReaper is fakeReaper, greeting each connection after delay.
func slowReaper(t *testing.T, delay time.Duration, greeting string, answer func(string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				time.Sleep(delay)
				conn.Write([]byte(greeting + "\n"))
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					conn.Write([]byte(answer(strings.TrimSpace(line)) + "\n"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestClientSpeaksTheProtocol(t *testing.T) {
	var lines []string
	addr := fakeReaper(t, Greeting, func(line string) string {
		lines = append(lines, line)
		if strings.HasPrefix(line, "forget") {
			return "no such cluster"
		}
		return "ok"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("s1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Register("kt-a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Forget("kt-a"); err == nil || !strings.Contains(err.Error(), "reaper refused forget kt-a: no such cluster") {
		t.Errorf("refused forget: %v", err)
	}
	if err := c.Register("Not_A_Cluster"); err == nil {
		t.Error("a bad cluster name was sent")
	}
	if want := []string{"hello s1", "register kt-a", "forget kt-a"}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("sent %q, want %q", lines, want)
	}
}

// TestClientWaitsForASlowGreeting: a reaper reached through a slow path
// (rootless podman's port forwarder under emulation) greets after more
// than a second; the client waits for it rather than hanging up and
// dialling again until the reaper gives up on clients.
func TestClientWaitsForASlowGreeting(t *testing.T) {
	addr := slowReaper(t, 1500*time.Millisecond, Greeting, func(string) string { return "ok" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("s1"); err != nil {
		t.Fatal(err)
	}
}

func TestClientRefusesAnotherVersion(t *testing.T) {
	addr := fakeReaper(t, "kindtest-reaper 1", func(string) string { return "ok" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, addr, func() bool { return false })
	var stale *StaleError
	if !errors.As(err, &stale) || stale.Greeting != "kindtest-reaper 1" {
		t.Fatalf("a reaper of version 1: %v, want a *StaleError", err)
	}
}
