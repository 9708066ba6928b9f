package reaper

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// fixture is a reaper under test with a real engine, and cheap stand-ins
// for clusters: one labelled network each.
type fixture struct {
	t       *testing.T
	dc      *docker.Client
	session string
	ln      net.Listener
	done    chan error
	mu      sync.Mutex
	logf    func(format string, args ...any) // also told what the reaper logs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return &fixture{t: t, dc: enginetest.Client(t), session: fmt.Sprintf("rt%d", time.Now().UnixNano()%1e9), done: make(chan error, 1)}
}

// serve starts the reaper; the clusters a test needs exist by then, so
// that its idle time is not spent waiting for the engine.
func (f *fixture) serve(cfg Config) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	f.ln = ln
	// The reaper may log after the test has returned (a client's
	// goroutine noting the test's last connection): from the test's
	// cleanup on, its lines go no further than logf.
	var logMu sync.Mutex
	ended := false
	f.t.Cleanup(func() {
		logMu.Lock()
		ended = true
		logMu.Unlock()
	})
	cfg.Logf = func(format string, args ...any) {
		logMu.Lock()
		if !ended {
			f.t.Logf(format, args...)
		}
		logMu.Unlock()
		f.mu.Lock()
		logf := f.logf
		f.mu.Unlock()
		if logf != nil {
			logf(format, args...)
		}
	}
	go func() { f.done <- Serve(context.Background(), f.dc, ln, cfg) }()
}

// cluster makes a stand-in cluster (a network) labelled with session and
// keep, removed at the end of the test whatever happens.
func (f *fixture) cluster(name, session, keep string) string {
	f.t.Helper()
	labels := map[string]string{lifetime.LabelSession: session, lifetime.LabelCluster: name, lifetime.LabelKeep: keep}
	if _, err := f.dc.CreateNetwork(context.Background(), name, labels, netip.Prefix{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = f.dc.RemoveLabelled(context.Background(), map[string]string{lifetime.LabelCluster: name})
	})
	return name
}

func (f *fixture) exists(name string) bool {
	f.t.Helper()
	ns, err := f.dc.ListNetworks(context.Background(), map[string]string{lifetime.LabelCluster: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(ns) > 0
}

// client connects, checks the greeting and says hello with the
// fixture's session.
func (f *fixture) client() (net.Conn, *bufio.Reader) {
	f.t.Helper()
	conn, r := f.dial()
	if reply := request(f.t, conn, r, "hello "+f.session); reply != "ok" {
		f.t.Fatalf("hello: %q", reply)
	}
	return conn, r
}

// dial connects and checks the greeting.
func (f *fixture) dial() (net.Conn, *bufio.Reader) {
	f.t.Helper()
	conn, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil || line != Greeting+"\n" {
		f.t.Fatalf("greeting %q, %v", line, err)
	}
	return conn, r
}

func request(t *testing.T, conn net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "%s\n", line); err != nil {
		t.Fatal(err)
	}
	reply, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(reply)
}

func (f *fixture) wait(within time.Duration) {
	f.t.Helper()
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Fatal(err)
		}
	case <-time.After(within):
		f.t.Fatalf("reaper still running after %v", within)
	}
}

func TestReaperRemovesOnlyWhatItsClientRegistered(t *testing.T) {
	f := newFixture(t)
	cfg := Config{Idle: 2 * time.Second, Settle: []time.Duration{500 * time.Millisecond}}
	s := f.session
	gone := f.cluster(s+"-gone", s, lifetime.KeepNever)
	onFailure := f.cluster(s+"-onfail", s, lifetime.KeepOnFailure)
	always := f.cluster(s+"-always", s, lifetime.KeepAlways)
	unregistered := f.cluster(s+"-unreg", s, lifetime.KeepNever)
	forgotten := f.cluster(s+"-forgot", s, lifetime.KeepNever)
	otherSession := f.cluster(s+"-other", s+"x", lifetime.KeepNever)
	marked := f.cluster(s+"-marked", s, lifetime.KeepOnFailure)
	// A kept cluster's marker volume.
	markerLabels := map[string]string{lifetime.LabelSession: s, lifetime.LabelCluster: marked, lifetime.LabelKeep: lifetime.Kept}
	if err := f.dc.CreateVolume(context.Background(), lifetime.MarkerVolume(marked), markerLabels); err != nil {
		t.Fatal(err)
	}

	f.serve(cfg)
	conn, r := f.client()
	for _, name := range []string{gone, onFailure, always, forgotten, otherSession, marked} {
		if reply := request(t, conn, r, "register "+name); reply != "ok" {
			t.Fatalf("register %s: %q", name, reply)
		}
	}
	if reply := request(t, conn, r, "forget "+forgotten); reply != "ok" {
		t.Fatalf("forget: %q", reply)
	}
	conn.Close()
	f.wait(time.Minute) // its last sweep, DefaultWatch, its idle time

	for name, want := range map[string]bool{
		gone: false, onFailure: false, always: true, unregistered: true,
		forgotten: true, otherSession: true, marked: true,
	} {
		if got := f.exists(name); got != want {
			t.Errorf("cluster %s exists=%t, want %t", name, got, want)
		}
	}
}

func TestReaperWithoutClientRemovesNothing(t *testing.T) {
	f := newFixture(t)
	cfg := Config{Idle: 300 * time.Millisecond}
	c := f.cluster(f.session+"-a", f.session, lifetime.KeepNever)
	f.serve(cfg)
	f.wait(10 * time.Second)
	if !f.exists(c) {
		t.Error("a reaper that never had a client removed a cluster")
	}
}

func TestReaperSweepsAgainForLateCreations(t *testing.T) {
	f := newFixture(t)
	gone := make(chan struct{})
	var once sync.Once
	cfg := Config{Idle: time.Second, Settle: []time.Duration{10 * time.Second}}
	name := f.session + "-late"
	f.serve(cfg)
	// Told when the client is gone, that is when the first sweep starts.
	f.mu.Lock()
	f.logf = func(format string, args ...any) {
		if strings.Contains(fmt.Sprintf(format, args...), "gone") {
			once.Do(func() { close(gone) })
		}
	}
	f.mu.Unlock()
	conn, r := f.client()
	if reply := request(t, conn, r, "register "+name); reply != "ok" {
		t.Fatalf("register: %q", reply)
	}
	conn.Close()
	<-gone
	// The engine finishes a creation its dead client asked for, after the
	// first sweep and before the settle sweep.
	time.Sleep(time.Second)
	f.cluster(name, f.session, lifetime.KeepNever)
	f.wait(60 * time.Second)
	if f.exists(name) {
		t.Error("a cluster created after its client was gone survived the settle sweep")
	}
}

// TestReaperWatchesForLateCreations: objects of a gone client's cluster
// that the engine creates after every settle sweep (a loaded engine
// finishing requests of the dead client) are removed when they appear;
// another cluster of the session, not registered, is left alone.
func TestReaperWatchesForLateCreations(t *testing.T) {
	f := newFixture(t)
	gone := make(chan struct{})
	var once sync.Once
	// The default watch time: on a loaded engine a creation takes seconds.
	cfg := Config{Idle: time.Second, Settle: []time.Duration{}}
	name := f.session + "-late"
	other := f.cluster(f.session+"-other", f.session, lifetime.KeepNever)
	f.serve(cfg)
	f.mu.Lock()
	f.logf = func(format string, args ...any) {
		if strings.Contains(fmt.Sprintf(format, args...), "gone") {
			once.Do(func() { close(gone) })
		}
	}
	f.mu.Unlock()
	conn, r := f.client()
	if reply := request(t, conn, r, "register "+name); reply != "ok" {
		t.Fatalf("register: %q", reply)
	}
	conn.Close()
	<-gone
	// Two late creations, after the only sweep, seconds apart.
	for i := range 2 {
		time.Sleep(3 * time.Second)
		created := time.Now()
		f.cluster(name, f.session, lifetime.KeepNever)
		for f.exists(name) {
			if time.Since(created) > 10*time.Second {
				t.Fatalf("late creation %d: still there 10 s after it was created", i+1)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("late creation %d removed %v after it was created", i+1, time.Since(created).Round(10*time.Millisecond))
	}
	f.wait(time.Minute)
	if !f.exists(other) {
		t.Error("the session's unregistered cluster was removed")
	}
}

func TestReaperClientsAreIndependent(t *testing.T) {
	f := newFixture(t)
	cfg := Config{Idle: time.Second, Settle: []time.Duration{}}
	a := f.cluster(f.session+"-a", f.session, lifetime.KeepNever)
	b := f.cluster(f.session+"-b", f.session, lifetime.KeepNever)
	f.serve(cfg)
	ca, ra := f.client()
	cb, rb := f.client()
	request(t, ca, ra, "register "+a)
	request(t, cb, rb, "register "+b)
	ca.Close()
	deadline := time.Now().Add(20 * time.Second)
	for f.exists(a) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if f.exists(a) {
		t.Fatal("client a's cluster was not removed after it left")
	}
	if !f.exists(b) {
		t.Fatal("client b's cluster was removed while b was still connected")
	}
	select {
	case <-f.done:
		t.Fatal("reaper exited with a client still connected")
	default:
	}
	cb.Close()
	f.wait(time.Minute) // its last sweep, DefaultWatch, its idle time
	if f.exists(b) {
		t.Error("client b's cluster survived b")
	}
}

func TestReaperRefusesBadRequests(t *testing.T) {
	f := newFixture(t)
	cfg := Config{Idle: time.Minute}
	f.serve(cfg)
	conn, r := f.dial()
	defer conn.Close()
	for _, line := range []string{"register " + f.session + "-a", "hello", "hello a b"} {
		if reply := request(t, conn, r, line); !strings.HasPrefix(reply, "error ") {
			t.Errorf("before hello: %q answered %q, want an error", line, reply)
		}
	}
	if reply := request(t, conn, r, "hello "+f.session); reply != "ok" {
		t.Fatalf("hello: %q", reply)
	}
	for _, line := range []string{"register ", "register  ", "register Not_A_Cluster", "forget", "explode " + f.session, "hello other"} {
		if reply := request(t, conn, r, line); !strings.HasPrefix(reply, "error ") {
			t.Errorf("%q answered %q, want an error", line, reply)
		}
	}
}

func TestReapRefusesEmptySelectors(t *testing.T) {
	dc := enginetest.Client(t)
	for _, tc := range [][2]string{{"", "s"}, {" ", "s"}, {"kt-abc", ""}} {
		if err := Reap(context.Background(), dc, tc[1], tc[0], t.Logf); err == nil {
			t.Errorf("Reap(session %q, cluster %q) accepted", tc[1], tc[0])
		}
	}
}

// TestReapClaimedCluster: a cluster claimed from a pool (a claim record of
// another session) is left by its pool's session, and removed whole, the
// pool's objects too, by its claimer's; a claimer's kept marker keeps it.
func TestReapClaimedCluster(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pool, claimer := f.session+"p", f.session+"c"
	claim := func(cluster, session string, keep string) {
		t.Helper()
		// The record is a container in kindtest; any labelled object
		// stands in for it here.
		l := map[string]string{lifetime.LabelCluster: cluster, lifetime.LabelSession: session, lifetime.LabelKeep: keep, lifetime.LabelRole: lifetime.RoleClaim}
		if err := f.dc.CreateVolume(ctx, cluster+"-claim", l); err != nil {
			t.Fatal(err)
		}
	}
	claimed := f.cluster(f.session+"-claimed", pool, lifetime.KeepNever)
	claim(claimed, claimer, lifetime.KeepNever)
	kept := f.cluster(f.session+"-kept", pool, lifetime.KeepNever)
	claim(kept, claimer, lifetime.KeepOnFailure)
	marker := map[string]string{lifetime.LabelSession: claimer, lifetime.LabelCluster: kept, lifetime.LabelKeep: lifetime.Kept}
	if err := f.dc.CreateVolume(ctx, lifetime.MarkerVolume(kept), marker); err != nil {
		t.Fatal(err)
	}
	unclaimed := f.cluster(f.session+"-unclaimed", pool, lifetime.KeepNever)
	logf := func(string, ...any) {}

	for _, name := range []string{claimed, kept, unclaimed} {
		if err := Reap(ctx, f.dc, pool, name, logf); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{claimed: true, kept: true, unclaimed: false} {
		if got := f.exists(name); got != want {
			t.Errorf("after the pool's session: cluster %s exists=%t, want %t", name, got, want)
		}
	}
	for _, name := range []string{claimed, kept} {
		if err := Reap(ctx, f.dc, claimer, name, logf); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{claimed: false, kept: true} {
		if got := f.exists(name); got != want {
			t.Errorf("after the claimer's session: cluster %s exists=%t (its pool-made network), want %t", name, got, want)
		}
	}
	if n, err := f.dc.ListVolumes(ctx, map[string]string{lifetime.LabelCluster: claimed}); err != nil || len(n) != 0 {
		t.Errorf("claimed cluster's claim record left after its claimer's session: %v %v", n, err)
	}
}
