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

// lineReaper stands in for a reaper where only the client's side is
// under test: it greets, answers every request ok (or, once muted, not at
// all), and records what each connection said and whether the client
// closed it.
type lineReaper struct {
	ln net.Listener

	mu     sync.Mutex
	killed bool
	muted  bool
	conns  []*lineConn
}

type lineConn struct {
	conn   net.Conn
	said   []string
	closed bool // by the client
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
			lc := &lineConn{conn: conn}
			f.mu.Lock()
			f.conns = append(f.conns, lc)
			f.mu.Unlock()
			go f.serve(lc)
		}
	}()
	return f
}

func (f *lineReaper) serve(lc *lineConn) {
	_, _ = io.WriteString(lc.conn, Greeting+"\n")
	r := bufio.NewReader(lc.conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			f.mu.Lock()
			lc.closed = errors.Is(err, io.EOF) && !f.killed
			f.mu.Unlock()
			return
		}
		f.mu.Lock()
		lc.said = append(lc.said, strings.TrimSpace(line))
		muted := f.muted
		f.mu.Unlock()
		if !muted {
			_, _ = io.WriteString(lc.conn, "ok\n")
		}
	}
}

// kill ends the reaper as a SIGKILL would: its listener and every
// connection closed.
func (f *lineReaper) kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed = true
	f.ln.Close()
	for _, lc := range f.conns {
		lc.conn.Close()
	}
}

func (f *lineReaper) dead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed
}

// mute makes the reaper stop answering, its connections left open: a
// reaper that is stuck, or one behind a proxy that keeps the client's
// side of a connection open.
func (f *lineReaper) mute() {
	f.mu.Lock()
	f.muted = true
	f.mu.Unlock()
}

// requests returns every request it heard on any connection, leaving out
// the heartbeat: each hello after a connection's first.
func (f *lineReaper) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, lc := range f.conns {
		for i, l := range lc.said {
			if i > 0 && strings.HasPrefix(l, "hello ") {
				continue
			}
			out = append(out, l)
		}
	}
	return out
}

// hellos counts the hellos heard on connection i.
func (f *lineReaper) hellos(i int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.conns) {
		return 0
	}
	n := 0
	for _, l := range f.conns[i].said {
		if strings.HasPrefix(l, "hello ") {
			n++
		}
	}
	return n
}

// closedByClient counts the connections the client closed.
func (f *lineReaper) closedByClient() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, lc := range f.conns {
		if lc.closed {
			n++
		}
	}
	return n
}

// dialer reaches whichever lineReaper is current; without one, dialling
// fails as kindtest's does when no reaper container can be had.
type dialer struct {
	mu    sync.Mutex
	cur   *lineReaper
	calls int
}

func (d *dialer) set(f *lineReaper) {
	d.mu.Lock()
	d.cur = f
	d.mu.Unlock()
}

func (d *dialer) dial(ctx context.Context) (*Client, error) {
	d.mu.Lock()
	f := d.cur
	d.calls++
	d.mu.Unlock()
	if f == nil {
		return nil, errors.New("no reaper container")
	}
	c, err := Dial(ctx, f.ln.Addr().String(), f.dead)
	if err != nil {
		return nil, err
	}
	c.timeout = 300 * time.Millisecond
	return c, nil
}

// logLines collects what a Session logs.
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

// waitFor polls cond for up to 10 s: a bound on correctness, not a
// measure of speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newTestSession(t *testing.T, d *dialer, log *logLines) *Session {
	t.Helper()
	s, err := NewSession(context.Background(), d.dial, "s1", SessionConfig{
		Heartbeat: 100 * time.Millisecond, Redial: 100 * time.Millisecond, Logf: log.logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TestClientNoticesTheEnd: a connection the reaper ends is lost at once,
// with no request under way, and takes no more requests.
func TestClientNoticesTheEnd(t *testing.T) {
	f := newLineReaper(t)
	d := &dialer{cur: f}
	c, err := d.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("s1"); err != nil {
		t.Fatal(err)
	}
	if c.Err() != nil {
		t.Fatalf("lost before the reaper went: %v", c.Err())
	}
	f.kill()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the end of the connection was not noticed within 10 s")
	}
	if err := c.Register("kt-a"); err == nil || err.Error() != c.Err().Error() || !strings.HasPrefix(err.Error(), "reaper connection: ") {
		t.Errorf("register on a lost connection: %v, want its loss (%v)", err, c.Err())
	}
}

// TestClientGivesUpOnSilence: a request with no answer in time loses the
// connection, which the client does not close.
func TestClientGivesUpOnSilence(t *testing.T) {
	f := newLineReaper(t)
	d := &dialer{cur: f}
	c, err := d.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.mute()
	err = c.Hello("s1")
	if err == nil || !strings.Contains(err.Error(), "no answer to hello s1 within 300ms") {
		t.Fatalf("hello to a silent reaper: %v, want no answer", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("the connection is not lost after a request had no answer")
	}
	if err := c.conn.SetDeadline(time.Time{}); errors.Is(err, net.ErrClosed) || f.closedByClient() != 0 {
		t.Error("the client closed its connection to the silent reaper")
	}
}

// TestSessionRegistersAgainAfterLoss: a reaper killed under a session is
// replaced: after failed attempts while there is none, the session
// reaches the next one, says hello and registers every cluster it holds
// (a cluster registered meanwhile included, forgotten ones not), logs
// one line for the loss and one once replaced, and goes on with the new
// reaper.
func TestSessionRegistersAgainAfterLoss(t *testing.T) {
	first := newLineReaper(t)
	d := &dialer{cur: first}
	log := &logLines{}
	s := newTestSession(t, d, log)
	for _, n := range []string{"kt-a", "kt-b", "kt-c"} {
		if err := s.Register(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Forget("kt-b"); err != nil {
		t.Fatal(err)
	}
	d.set(nil) // the reaper is gone, and no other is there yet
	first.kill()
	waitFor(t, "the session says no reaper answers yet", func() bool { return len(log.all()) > 0 })
	if err := s.Register("kt-d"); !errors.Is(err, errReaching) {
		t.Errorf("register with no reaper: %v, want %v", err, errReaching)
	}
	second := newLineReaper(t)
	d.set(second)
	want := []string{"hello s1", "register kt-a", "register kt-c", "register kt-d"}
	waitFor(t, "the next reaper hears of every live cluster", func() bool {
		got := second.requests()
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	if err := s.Register("kt-e"); err != nil {
		t.Fatalf("register with the next reaper: %v", err)
	}
	if got := second.requests(); got[len(got)-1] != "register kt-e" {
		t.Errorf("the next reaper heard %q last, want register kt-e", got[len(got)-1])
	}
	waitFor(t, "the reconnection is logged", func() bool { return len(log.all()) >= 2 })
	lines := log.all()
	if len(lines) != 2 || strings.Count(strings.Join(lines, "\n"), "reaper connection was lost") != 1 ||
		!strings.Contains(lines[0], "no reaper answers yet (no reaper container)") ||
		!strings.Contains(lines[1], "reached a reaper again") || !strings.Contains(lines[1], "registered 3 cluster(s)") {
		t.Errorf("log: %q, want one line for the failed first attempt that says the connection was lost and one for the reconnection with 3 clusters", lines)
	}
}

// TestSessionReplacesKilledReaperOnce: with a reaper to be had at once,
// the loss is one line, and the heartbeat goes on on the new connection.
func TestSessionReplacesKilledReaperOnce(t *testing.T) {
	first := newLineReaper(t)
	d := &dialer{cur: first}
	log := &logLines{}
	s := newTestSession(t, d, log)
	if err := s.Register("kt-a"); err != nil {
		t.Fatal(err)
	}
	second := newLineReaper(t)
	d.set(second)
	first.kill()
	waitFor(t, "the next reaper hears of the cluster", func() bool { return slices.Contains(second.requests(), "register kt-a") })
	waitFor(t, "the heartbeat says hello again on the new connection", func() bool { return second.hellos(0) >= 3 })
	waitFor(t, "the reconnection is logged", func() bool { return len(log.all()) >= 1 })
	lines := log.all()
	if len(lines) != 1 || !strings.Contains(lines[0], "the reaper connection was lost (reaper connection: ") || !strings.Contains(lines[0], "reached a reaper again and registered 1 cluster(s)") {
		t.Errorf("log: %q, want one line", lines)
	}
}

// TestSessionSilentReaper: a reaper that stops answering without ending
// the connection is given up on at the next heartbeat, but that
// connection is never closed (a reaper that is only slow would otherwise
// remove live clusters); the clusters go to a reaper reached again.
func TestSessionSilentReaper(t *testing.T) {
	first := newLineReaper(t)
	d := &dialer{cur: first}
	log := &logLines{}
	s := newTestSession(t, d, log)
	if err := s.Register("kt-a"); err != nil {
		t.Fatal(err)
	}
	second := newLineReaper(t)
	d.set(second)
	first.mute()
	waitFor(t, "the next reaper hears of the cluster", func() bool { return slices.Contains(second.requests(), "register kt-a") })
	if n := first.closedByClient(); n != 0 {
		t.Errorf("the session closed %d connection(s) to the silent reaper, want none", n)
	}
	s.mu.Lock()
	held := slices.Clone(s.held)
	s.mu.Unlock()
	if len(held) != 2 {
		t.Fatalf("the session holds %d connections, want the silent reaper's and the new one", len(held))
	}
	if err := held[0].conn.SetDeadline(time.Time{}); errors.Is(err, net.ErrClosed) {
		t.Error("the session closed its connection to the silent reaper")
	}
	waitFor(t, "the reconnection is logged", func() bool { return len(log.all()) >= 1 })
	if lines := log.all(); len(lines) != 1 || !strings.Contains(lines[0], "no answer to hello s1") || !strings.Contains(lines[0], "reached a reaper again") {
		t.Errorf("log: %q, want one line naming the heartbeat's unanswered hello", lines)
	}
}

// TestNewSessionNoReaper: with no reaper to be had, there is no session,
// and the error is the dialer's.
func TestNewSessionNoReaper(t *testing.T) {
	d := &dialer{}
	_, err := NewSession(context.Background(), d.dial, "s1", SessionConfig{Heartbeat: time.Second, Redial: time.Second})
	if err == nil || err.Error() != "no reaper container" {
		t.Errorf("got %v, want the dialer's error", err)
	}
	if d.calls != 1 {
		t.Errorf("dialled %d times, want once: the dialer makes its own attempts", d.calls)
	}
}

// TestNewSessionRetriesHello: a reaper that greets and then does not
// answer hello (it is exiting, or stuck) is left, and reached again.
func TestNewSessionRetriesHello(t *testing.T) {
	silent := newLineReaper(t)
	silent.mute()
	d := &dialer{cur: silent}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := NewSession(ctx, d.dial, "s1", SessionConfig{Heartbeat: time.Second, Redial: time.Second})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last attempt: reaper connection: no answer to hello s1") {
		t.Fatalf("only a silent reaper: %v, want the deadline and the last attempt", err)
	}
	waitFor(t, "the connection that said no hello is closed", func() bool { return silent.closedByClient() > 0 })
	good := newLineReaper(t)
	d.set(good)
	s, err := NewSession(context.Background(), d.dial, "s1", SessionConfig{Heartbeat: time.Second, Redial: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
}

// TestServeAnswersRepeatedHello: the heartbeat is a hello with the same
// session, which the reaper's side answers ok, changing nothing; another
// session on the same connection is refused.
func TestServeAnswersRepeatedHello(t *testing.T) {
	cl := &client{owned: map[string]bool{}}
	for _, req := range []string{"hello s1", "register kt-a", "hello s1", "hello s1"} {
		if got := cl.handle(req); got != "ok" {
			t.Fatalf("%s: %q, want ok", req, got)
		}
	}
	if cl.session != "s1" || !cl.owned["kt-a"] {
		t.Errorf("after repeated hellos: session %q, owned %v", cl.session, cl.owned)
	}
	if got := cl.handle("hello s2"); !strings.HasPrefix(got, "error session already set") {
		t.Errorf("hello s2 after s1: %q, want refused", got)
	}
}
