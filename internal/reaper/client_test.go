package reaper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineReaper speaks the reaper's protocol and nothing more: it greets,
// answers every request ok (or, once muted, not at all) and records what
// each connection said. It stands in for the reaper where only the
// client's side is under test.
type lineReaper struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	said  [][]string // per connection
	muted bool
}

func newLineReaper(t *testing.T) *lineReaper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &lineReaper{ln: ln}
	t.Cleanup(f.kill)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			i := len(f.conns)
			f.conns = append(f.conns, conn)
			f.said = append(f.said, nil)
			f.mu.Unlock()
			go f.serve(i, conn)
		}
	}()
	return f
}

func (f *lineReaper) serve(i int, conn net.Conn) {
	_, _ = io.WriteString(conn, Greeting+"\n")
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f.mu.Lock()
		f.said[i] = append(f.said[i], strings.TrimSpace(line))
		muted := f.muted
		f.mu.Unlock()
		if !muted {
			_, _ = io.WriteString(conn, "ok\n")
		}
	}
}

// kill ends the reaper as a SIGKILL would: its listener and every
// connection closed.
func (f *lineReaper) kill() {
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *lineReaper) mute() {
	f.mu.Lock()
	f.muted = true
	f.mu.Unlock()
}

// requests returns every request it heard, on any connection, but the
// heartbeat's repeated hellos after the first of each connection.
func (f *lineReaper) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, said := range f.said {
		for j, l := range said {
			if j > 0 && strings.HasPrefix(l, "hello ") {
				continue
			}
			out = append(out, l)
		}
	}
	return out
}

// dialer dials whichever lineReaper is current; none fails the dial.
type dialer struct {
	mu  sync.Mutex
	cur *lineReaper
}

func (d *dialer) set(f *lineReaper) {
	d.mu.Lock()
	d.cur = f
	d.mu.Unlock()
}

func (d *dialer) dial(ctx context.Context) (net.Conn, *bufio.Reader, error) {
	d.mu.Lock()
	f := d.cur
	d.mu.Unlock()
	if f == nil {
		return nil, nil, errors.New("no reaper container")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != Greeting {
		conn.Close()
		return nil, nil, fmt.Errorf("greeting %q: %v", line, err)
	}
	return conn, r, nil
}

// logLines collects what a Client logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// waitFor polls cond for up to 10 s: a correctness bound, not a timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newTestClient(t *testing.T, d *dialer, log *logLines) *Client {
	t.Helper()
	c, err := NewClient(context.Background(), d.dial, "s1", ClientConfig{
		ReplyTimeout: 500 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Redial: 100 * time.Millisecond, Logf: log.logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// TestClientRegistersAgainAfterLoss: a reaper killed under a client is
// replaced: the client reaches the next one (after failed attempts while
// there is none), says hello and registers every cluster it holds, not the
// forgotten ones, logs that once, and goes on with the new one.
func TestClientRegistersAgainAfterLoss(t *testing.T) {
	d := &dialer{}
	first := newLineReaper(t)
	d.set(first)
	log := &logLines{}
	c := newTestClient(t, d, log)
	for _, n := range []string{"kt-a", "kt-b", "kt-c"} {
		if err := c.Register(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Forget("kt-b"); err != nil {
		t.Fatal(err)
	}
	d.set(nil) // the reaper is gone, and no other is there yet
	first.kill()
	waitFor(t, "the client gives up on the killed reaper", func() bool { return c.Register("kt-d") != nil })
	waitFor(t, "a log line says no reaper answers yet", func() bool { return len(log.all()) > 0 })
	second := newLineReaper(t)
	d.set(second)
	want := []string{"hello s1", "register kt-a", "register kt-c", "register kt-d"}
	waitFor(t, "the next reaper hears of every live cluster", func() bool {
		got := second.requests()
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	if err := c.Register("kt-e"); err != nil {
		t.Fatalf("register with the next reaper: %v", err)
	}
	if got := second.requests(); got[len(got)-1] != "register kt-e" {
		t.Errorf("the next reaper heard %v last, want register kt-e", got)
	}
	lines := log.all()
	if len(lines) != 2 || !strings.Contains(lines[0], "no reaper answers yet") || !strings.Contains(lines[1], "reached a reaper again") || !strings.Contains(lines[1], "registered 3 cluster(s)") {
		t.Errorf("log: %q, want one line for the failed first attempt and one for the reconnection with 3 clusters", lines)
	}
}

// TestClientSilentReaper: a reaper that stops answering without closing
// the connection is given up on at the next heartbeat, but that
// connection is never closed (a reaper that is only slow would otherwise
// remove live clusters); the clusters go to a reaper reached again.
func TestClientSilentReaper(t *testing.T) {
	d := &dialer{}
	first := newLineReaper(t)
	d.set(first)
	log := &logLines{}
	c := newTestClient(t, d, log)
	if err := c.Register("kt-a"); err != nil {
		t.Fatal(err)
	}
	second := newLineReaper(t)
	d.set(second)
	first.mute()
	waitFor(t, "the next reaper hears of the cluster", func() bool {
		return slices.Contains(second.requests(), "register kt-a")
	})
	c.mu.Lock()
	abandoned := slices.Clone(c.abandoned)
	c.mu.Unlock()
	if len(abandoned) != 1 {
		t.Fatalf("%d connections given up on, want the silent reaper's", len(abandoned))
	}
	if err := abandoned[0].conn.SetWriteDeadline(time.Time{}); errors.Is(err, net.ErrClosed) {
		t.Error("the client closed its connection to the silent reaper")
	}
	if lines := log.all(); len(lines) != 1 || !strings.Contains(lines[0], "reached a reaper again") {
		t.Errorf("log: %q, want one line", lines)
	}
}

func TestNewClientNoReaper(t *testing.T) {
	d := &dialer{}
	if _, err := NewClient(context.Background(), d.dial, "s1", ClientConfig{ReplyTimeout: time.Second, Heartbeat: time.Second, Redial: time.Second}); err == nil || !strings.Contains(err.Error(), "no reaper container") {
		t.Errorf("got %v, want the dial's error", err)
	}
}
