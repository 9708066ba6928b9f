package lb

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// echoServer answers each line with its name.
func echoServer(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintln(c, name)
				}
			}()
		}
	}()
	return ln
}

func ask(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintln(c, "hi")
	s, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return s[:len(s)-1]
}

// TestUnitBalancer relays round robin over live backends and skips one
// that went away.
func TestUnitBalancer(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	// A port nothing listens on: a stopped backend.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, Config{Backends: []string{a.Addr().String(), deadAddr, b.Addr().String()}, CheckInterval: 50 * time.Millisecond})
	}()
	seen := map[string]int{}
	for range 10 {
		seen[ask(t, ln.Addr().String())]++
	}
	if seen["a"] == 0 || seen["b"] == 0 || len(seen) != 2 {
		t.Fatalf("answers %v: want both live backends and nothing else", seen)
	}
	a.Close()
	for range 5 {
		if got := ask(t, ln.Addr().String()); got != "b" {
			t.Fatalf("after a went away: answer %q, want b", got)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
