package kindtest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/kindtest"
)

// Tests of what keeps cleanup safe: the reaper, signals, exits, faults in
// the middle of creation and of a test, concurrency. Many run this test
// binary as a child test process (see TestMain) and end it in some way.

// child is a child test process and what it printed.
type childProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser // mode "hold" deletes its cluster once it is closed
	session string
	mu      sync.Mutex
	lines   []string
	last    string // the last progress line before it was ended
	done    chan struct{}
}

// startChild starts this binary as a child in mode with its own session
// (and, when ownReaper, a reaper of its own). It is goroutine-safe: it
// reports failure as an error.
func startChild(mode string, ownReaper bool, env ...string) (*childProc, error) {
	session := fmt.Sprintf("s%d", rand.Int64N(1e12))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "KINDTEST_SESSION="+session)
	if ownReaper {
		cmd.Env = append(cmd.Env, childReaperEnv+"=kindtest-reaper-test-"+session)
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &childProc{cmd: cmd, stdin: in, session: session, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
		}
	}()
	return c, nil
}

func (c *childProc) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// waitFor waits until the child printed a line containing marker.
func (c *childProc) waitFor(marker string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if strings.Contains(c.output(), marker) {
			return nil
		}
		select {
		case <-c.done:
			if strings.Contains(c.output(), marker) {
				return nil
			}
			return fmt.Errorf("child ended before printing %q:\n%s", marker, c.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("child did not print %q within %v:\n%s", marker, within, c.output())
}

// end sends sig and waits for the child to exit.
func (c *childProc) end(sig syscall.Signal) error {
	c.mu.Lock()
	if n := len(c.lines); n > 0 {
		c.last = c.lines[n-1]
	}
	c.mu.Unlock()
	_ = c.cmd.Process.Signal(sig)
	return c.wait()
}

// wait waits for the child to exit, once its output has been read to the
// end: exec.Cmd.Wait closes the pipe, and a line still unread then (the
// last ones a child prints before it exits) would be lost.
func (c *childProc) wait() error {
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		// Something else holds the pipe open; Wait closes it.
	}
	err := c.cmd.Wait()
	<-c.done
	return err
}

func (c *childProc) reaperName() string { return "kindtest-reaper-test-" + c.session }

// count returns how many containers, volumes and networks carry every
// given label, without logging them.
func count(dc *docker.Client, labels map[string]string) (int, error) {
	ctx := context.Background()
	cs, err := dc.ListContainers(ctx, labels)
	if err != nil {
		return 0, err
	}
	vs, err := dc.ListVolumes(ctx, labels)
	if err != nil {
		return 0, err
	}
	ns, err := dc.ListNetworks(ctx, labels)
	if err != nil {
		return 0, err
	}
	return len(cs) + len(vs) + len(ns), nil
}

// reaperState is the state of a reaper container, "" when it is gone.
func reaperState(dc *docker.Client, name string) string {
	info, err := dc.InspectContainer(context.Background(), name)
	if err != nil {
		return ""
	}
	return info.Status
}

// gone is how long after a process ended its objects took to go.
type gone struct {
	cluster time.Duration // every object of its session
	reaper  time.Duration // its own reaper container, when it had one
	state   string        // the reaper's state when it stopped being waited for
}

// waitGone polls until nothing of the child's session is left, within the
// given time, and its reaper (if it had its own) has exited, within twice
// that. A reaper container left "created"
// (the process was killed between the requests that create and start it)
// is reported, not waited for: nothing can start it but the next process
// that needs a reaper.
func waitGone(dc *docker.Client, c *childProc, ownReaper bool, within time.Duration) (gone, error) {
	start := time.Now()
	sel := map[string]string{kindtest.LabelSession: c.session}
	var g gone
	clusterGone := false
	for {
		n, err := count(dc, sel)
		if err != nil {
			return g, err
		}
		if n == 0 && !clusterGone {
			clusterGone, g.cluster = true, time.Since(start)
		}
		if !clusterGone && time.Since(start) > within {
			return g, fmt.Errorf("after %v: %d object(s) of session %s left", within, n, c.session)
		}
		g.state = ""
		if ownReaper {
			g.state = reaperState(dc, c.reaperName())
		}
		if clusterGone && (g.state == "" || g.state == "created") {
			g.reaper = time.Since(start)
			return g, nil
		}
		// The reaper is no object of the process: it exits by itself once
		// it has swept again and has had no client for its idle time.
		if time.Since(start) > 2*within {
			return g, fmt.Errorf("after %v: the reaper is still %q", 2*within, g.state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func reaperImage(t *testing.T, dc *docker.Client) {
	t.Helper()
	if _, err := dc.InspectImage(context.Background(), kindtest.ReaperImage); err != nil {
		t.Fatalf("reaper image: %v (build it with `go run ./cmd/kindtest build`)", err)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func TestKillAtRandomMoments(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	reaperImage(t, dc)
	runs := envInt("KINDTEST_FAULT_RUNS", 20)
	// How long a child takes from its start to a created cluster on this
	// machine now: the kills are spread over that and a second of body.
	calib, err := startChild("create", true)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := calib.waitFor("child: created", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	span := time.Since(began) + time.Second
	_ = calib.end(syscall.SIGKILL)
	t.Logf("a child creates its cluster in %v: kills spread over %v", span-time.Second, span)
	type result struct {
		at      time.Duration
		last    string
		objects int // the cluster's objects just after the kill
		gone    gone
	}
	results := make([]result, runs)
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// Spread over the reaper's start, every step of creation
			// (about 2 s here) and the test body.
			at := time.Duration(rand.Int64N(int64(span)))
			c, err := startChild("create", true)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(at)
			_ = c.end(syscall.SIGKILL)
			objects, _ := count(dc, map[string]string{kindtest.LabelSession: c.session})
			g, err := waitGone(dc, c, true, 30*time.Second)
			if err != nil {
				t.Errorf("run %d, killed %v after start (last line %q): %v\n%s", i, at, c.last, err, c.output())
			}
			if g.state == "created" {
				// The documented gap: the next sweep removes it.
				pruneOrphans(t, c.session)
				if s := reaperState(dc, c.reaperName()); s != "" {
					t.Errorf("run %d: a reaper left %q was not removed by the sweep (now %q)", i, g.state, s)
				}
			}
			results[i] = result{at: at, last: c.last, objects: objects, gone: g}
		}()
	}
	wg.Wait()
	var worst, worstReaper time.Duration
	withObjects := 0
	for i, r := range results {
		t.Logf("run %2d: killed %5.2fs after start, last line %-55q, %d object(s): cluster gone %5.2fs later, reaper %5.2fs%s", i, r.at.Seconds(), r.last, r.objects, r.gone.cluster.Seconds(), r.gone.reaper.Seconds(),
			map[bool]string{true: " (reaper left created, removed by the sweep)"}[r.gone.state == "created"])
		worst, worstReaper = max(worst, r.gone.cluster), max(worstReaper, r.gone.reaper)
		if r.objects > 0 {
			withObjects++
		}
	}
	// Kills before anything exists test little; most must find a cluster.
	if withObjects < runs/3 {
		t.Errorf("only %d of %d kills found cluster objects to remove", withObjects, runs)
	}
	t.Logf("worst: cluster gone %v after the kill, reaper %v", worst.Round(100*time.Millisecond), worstReaper.Round(100*time.Millisecond))
}

func TestSignalsAtRandomMoments(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows: a process cannot send another SIGINT or SIGTERM (internal/interrupt tests what Windows does)")
	}
	dc := engine(t)
	nodeImage(t, dc)
	reaperImage(t, dc)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, reaper := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/reaper=%t", sig, reaper), func(t *testing.T) {
				t.Parallel()
				for run := range 2 {
					at := time.Duration(rand.Int64N(int64(4 * time.Second)))
					var env []string
					if !reaper {
						env = append(env, "KINDTEST_REAPER=off")
					}
					c, err := startChild("create", reaper, env...)
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(at)
					err = c.end(sig)
					var ee *exec.ExitError
					ws, _ := func() (syscall.WaitStatus, bool) {
						if errors.As(err, &ee) {
							w, ok := ee.Sys().(syscall.WaitStatus)
							return w, ok
						}
						var none syscall.WaitStatus
						return none, false
					}()
					switch {
					case ee == nil:
						t.Errorf("child exit: %v, want it ended by the signal", err)
					case reaper && (!ws.Signaled() || ws.Signal() != sig):
						// No handler: the signal's default effect.
						t.Errorf("child ended with %v, want the signal's default effect (%v)", ee, sig)
					case !reaper && !ws.Signaled() && ws.ExitStatus() == 0:
						// The handler removes the clusters and raises the
						// signal again, unless the aborted creation ends the
						// process first, with a failure.
						t.Errorf("child ended with %v after %v", ee, sig)
					}
					if !reaper && strings.Contains(c.last, "child: created") {
						// Without a reaper, the library removed it before
						// the process ended.
						if n, _ := count(dc, map[string]string{kindtest.LabelSession: c.session}); n != 0 {
							t.Errorf("run %d: %d object(s) left when the interrupted process ended:\n%s", run, n, c.output())
						}
					}
					if !reaper {
						// Interrupted in the middle of creation, without a
						// reaper, a creation the engine finishes late is
						// the next sweep's to remove.
						pruneOrphans(t, c.session)
					}
					g, err := waitGone(dc, c, reaper, 30*time.Second)
					if err != nil {
						t.Errorf("run %d, %v after start (last line %q): %v\n%s", run, at, c.last, err, c.output())
					}
					t.Logf("run %d: %v %.2fs after start (last line %q): cluster gone %.2fs later, reaper %.2fs", run, sig, at.Seconds(), c.last, g.cluster.Seconds(), g.reaper.Seconds())
				}
			})
		}
	}
}

func TestExitFromTestBody(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	reaperImage(t, dc)
	c, err := startChild("exit", true)
	if err != nil {
		t.Fatal(err)
	}
	err = c.wait()
	if !strings.Contains(c.output(), "child: created") {
		t.Fatalf("child did not create its cluster (%v):\n%s", err, c.output())
	}
	g, err := waitGone(dc, c, true, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("os.Exit(1) in the test body: cluster gone %v later, reaper %v", g.cluster.Round(100*time.Millisecond), g.reaper.Round(100*time.Millisecond))
}

// TestReaperKilledWhileTestRuns: a reaper killed while the test body runs
// is replaced: the process reaches (starts) a reaper again, registers its
// cluster there and says so once; killed afterwards with SIGKILL, it
// leaves nothing within 30 s.
func TestReaperKilledWhileTestRuns(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	reaperImage(t, dc)
	c, err := startChild("create", true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.end(syscall.SIGKILL)
	if err := c.waitFor("child: created", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := dc.KillContainer(context.Background(), c.reaperName(), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := c.waitFor("reached a reaper again", time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("registered with a new reaper %v after the old one was killed", time.Since(killed).Round(100*time.Millisecond))
	for _, l := range strings.Split(c.output(), "\n") {
		if strings.Contains(l, "reaper connection was lost") {
			t.Logf("child said: %s", l)
		}
	}
	if n := strings.Count(c.output(), "reaper connection was lost"); n != 1 {
		t.Errorf("the loss is logged %d times, want once:\n%s", n, c.output())
	}
	sel := map[string]string{kindtest.LabelSession: c.session}
	running, err := dc.ListContainers(context.Background(), sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 2 {
		t.Fatalf("%d node containers after the reaper was killed, want the cluster's 2", len(running))
	}
	_ = c.end(syscall.SIGKILL)
	g, err := waitGone(dc, c, true, 30*time.Second)
	if err != nil {
		logReapers(t, dc)
		t.Fatal(err)
	}
	t.Logf("SIGKILL after the reaper was replaced: cluster gone %v later, reaper %v", g.cluster.Round(100*time.Millisecond), g.reaper.Round(100*time.Millisecond))
}

func TestNodeKilledMidTest(t *testing.T) {
	dc := engine(t)
	c := start(t, dc, kindtest.WithoutKubernetes())
	ctx := context.Background()
	if err := dc.KillContainer(ctx, c.ControlPlane().ID(), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	// The engine records the exit a moment after the kill.
	var err error
	for range 50 {
		if _, err = c.ControlPlane().Exec(ctx, "true"); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), c.ControlPlane().Name()) || !strings.Contains(err.Error(), "node container is exited") {
		t.Fatalf("exec on a killed node: %v, want an error naming the node and its state", err)
	}
	t.Logf("error: %v", err)
}

func TestNetworkRemovedMidCreate(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	var hook *phaseHook
	hook = &phaseHook{t: t, marker: "network done", fn: func(string) {
		if err := dc.RemoveNetwork(context.Background(), hook.name); err != nil {
			t.Error(err)
		}
	}}
	_, err := kindtest.New(context.Background(), kindtest.WithImage(img), kindtest.WithoutKubernetes(), kindtest.WithLogger(hook))
	// The engine refuses to create the container, or to start it.
	var ne *kindtest.NodeError
	if !errors.As(err, &ne) || (ne.Step != "create container" && ne.Step != "start container") || !strings.Contains(err.Error(), "network "+hook.name) {
		t.Fatalf("got %v, want a NodeError from creating or starting a container on the removed network", err)
	}
	t.Logf("error: %v", err)
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestConcurrentProcesses(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	reaperImage(t, dc)
	const procs = 6
	children := make([]*childProc, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := startChild("cycle", false)
			if err != nil {
				t.Error(err)
				return
			}
			if err := c.wait(); err != nil {
				t.Errorf("process %d: %v\n%s", i, err, c.output())
			}
			children[i] = c
		}()
	}
	wg.Wait()
	names := map[string]bool{}
	re := regexp.MustCompile(`child: deleted (\S+)`)
	for i, c := range children {
		if c == nil {
			continue
		}
		m := re.FindStringSubmatch(c.output())
		if m == nil {
			t.Errorf("process %d did not create and delete a cluster:\n%s", i, c.output())
			continue
		}
		if names[m[1]] {
			t.Errorf("two processes made cluster %s", m[1])
		}
		names[m[1]] = true
		if n, _ := count(dc, map[string]string{kindtest.LabelSession: c.session}); n != 0 {
			t.Errorf("process %d: %d object(s) left", i, n)
		}
	}
}

// engineObjects counts the engine's containers, volumes and networks whose
// names start with prefix, labelled or not.
func engineObjects(t *testing.T, dc *docker.Client, prefix string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	cs, err := dc.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if strings.HasPrefix(c.Name, prefix) {
			n++
		}
	}
	vs, err := dc.ListVolumes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if strings.HasPrefix(v.Name, prefix) {
			n++
		}
	}
	ns, err := dc.ListNetworks(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, nw := range ns {
		if strings.HasPrefix(nw.Name, prefix) {
			n++
		}
	}
	return n
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

func TestCyclesDoNotGrow(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	ctx := context.Background()
	prefix := fmt.Sprintf("cyc%d", rand.IntN(1e6))
	cycle := func(i int) {
		c, err := kindtest.New(ctx, kindtest.WithImage(img), kindtest.WithoutKubernetes(), kindtest.WithNamePrefix(prefix))
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := c.Delete(ctx); err != nil {
			t.Fatalf("cycle %d: delete: %v", i, err)
		}
		if err := c.Delete(ctx); err != nil {
			t.Errorf("cycle %d: second delete: %v", i, err)
		}
	}
	// The first cycle makes what lives as long as the process (the
	// reaper connection); count after it.
	cycle(0)
	settle := func() { runtime.GC(); time.Sleep(500 * time.Millisecond) }
	settle()
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	for i := 1; i <= 20; i++ {
		cycle(i)
	}
	settle()
	fdsAfter, goroutinesAfter := openFDs(t), runtime.NumGoroutine()
	t.Logf("after 20 cycles: open files %d -> %d, goroutines %d -> %d", fds, fdsAfter, goroutines, goroutinesAfter)
	// A few idle connections may come and go; growth per cycle may not.
	if fdsAfter > fds+4 {
		t.Errorf("open files grew from %d to %d over 20 cycles", fds, fdsAfter)
	}
	if goroutinesAfter > goroutines+4 {
		t.Errorf("goroutines grew from %d to %d over 20 cycles", goroutines, goroutinesAfter)
	}
	if n := engineObjects(t, dc, prefix); n != 0 {
		t.Errorf("%d engine object(s) named %s* left", n, prefix)
	}
	if err := kindtest.DeleteCluster(ctx, "kt-nonexistent"); err == nil || !strings.Contains(err.Error(), "no such cluster") {
		t.Errorf("deleting an unknown cluster: %v", err)
	}
}

func TestConcurrentDeletes(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	ctx := context.Background()
	for round := range 3 {
		c, err := kindtest.New(ctx, kindtest.WithImage(img), kindtest.WithoutKubernetes(), kindtest.WithWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		other, err := kindtest.Attach(ctx, c.Name())
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i, del := range []func() error{
			func() error { return c.Delete(ctx) },
			func() error { return other.Delete(ctx) },
			func() error { return kindtest.DeleteCluster(ctx, c.Name()) },
		} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = del() }()
		}
		wg.Wait()
		for i, err := range errs[:2] {
			if err != nil {
				t.Errorf("round %d: delete %d: %v", round, i, err)
			}
		}
		// The third may find the cluster already gone, which it reports.
		if err := errs[2]; err != nil && !strings.Contains(err.Error(), "no such cluster") {
			t.Errorf("round %d: DeleteCluster: %v", round, err)
		}
		if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: c.Name()}); n != 0 {
			t.Errorf("round %d: %d object(s) left", round, n)
		}
	}

	// Two sweeps of the same orphan at once.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	orphan := fmt.Sprintf("orphan%d", rand.IntN(1e6))
	labels := map[string]string{
		kindtest.LabelCluster: orphan, kindtest.LabelSession: "sweeptest",
		kindtest.LabelOwnerHost: host, kindtest.LabelOwnerPID: fmt.Sprint(dead.Process.Pid),
		kindtest.LabelKeep: "never", kindtest.LabelCreated: time.Now().UTC().Format(time.RFC3339),
	}
	if _, err := dc.CreateNetwork(ctx, orphan, labels, netip.Prefix{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := dc.CreateVolume(ctx, fmt.Sprintf("%s-v%d", orphan, i), labels); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = kindtest.Prune(ctx, kindtest.PruneOrphans) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && strings.Contains(err.Error(), orphan) {
			t.Errorf("sweep %d: %v", i, err)
		}
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: orphan}); n != 0 {
		t.Errorf("%d object(s) of the orphan left", n)
	}
}

func TestCancelMidCreateLeavesNothing(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	for _, after := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond, time.Second} {
		t.Run(after.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hook := &phaseHook{t: t, marker: "network done", fn: func(string) { time.AfterFunc(after, cancel) }}
			c, err := kindtest.New(ctx, kindtest.WithImage(img), kindtest.WithWorkers(1), kindtest.WithoutKubernetes(), kindtest.WithLogger(hook))
			if err == nil {
				_ = c.Delete(context.Background())
				t.Skipf("creation finished within %v of the network", after)
			}
			// Checked at once: New has returned, nothing may be in flight.
			if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
				t.Errorf("%d labelled object(s) left", n)
			}
			if n := engineObjects(t, dc, hook.name); n != 0 {
				t.Errorf("%d object(s) named %s* left, labelled or not", n, hook.name)
			}
		})
	}
}

func TestKubeadmInitFailsFast(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	hook := &phaseHook{t: t, marker: "\x00"}
	start := time.Now()
	_, err := kindtest.New(context.Background(), kindtest.WithImage(img), kindtest.WithLogger(hook),
		kindtest.WithCreateTimeout(10*time.Minute), kindtest.WithInitWrapperForTest("timeout 1 "))
	t.Logf("failed after %v: %v", time.Since(start).Round(100*time.Millisecond), err)
	var ne *kindtest.NodeError
	if !errors.As(err, &ne) || ne.Step != "kubeadm init" {
		t.Fatalf("got %v, want a kubeadm init NodeError", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the failure waited for the create timeout: %v", err)
	}
	if !strings.Contains(err.Error(), "kubeadm init failed; its last lines") || !strings.Contains(err.Error(), "[init]") {
		t.Errorf("error lacks kubeadm's own output: %v", err)
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestDeadlineNamedInError(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	// Creation gets 2 s: the 32 s timeout less the 30 s kept for cleanup.
	out, err := goTest(t, nil, "-timeout", "32s", "./kindtest/testdata/deadline")
	if err == nil {
		t.Fatal("the child's creation did not run into its deadline")
	}
	if !strings.Contains(out, "test binary's deadline") || strings.Contains(out, "WithCreateTimeout raises") {
		t.Errorf("the error does not name go test's -timeout as the deadline")
	}
	m := regexp.MustCompile(`creating cluster (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the child did not start creating")
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: m[1]}); n != 0 {
		t.Errorf("%d object(s) left", n)
	}
}

func TestPanickingTest(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	for _, keep := range []string{"never", "on-failure"} {
		t.Run(keep, func(t *testing.T) {
			artifacts := t.TempDir()
			out, err := goTest(t, []string{"KINDTEST_KEEP=" + keep, "ARTIFACTS=" + artifacts}, "./kindtest/testdata/panic")
			if err == nil || !strings.Contains(out, "PANIC cluster=") {
				t.Fatalf("the child did not panic with a cluster up: %v", err)
			}
			name := regexp.MustCompile(`PANIC cluster=(\S+)`).FindStringSubmatch(out)[1]
			if !strings.Contains(out, "logs exported to") {
				t.Error("no logs exported for the panicking test")
			}
			if dirs, _ := filepath.Glob(filepath.Join(artifacts, name+"*")); len(dirs) == 0 {
				t.Errorf("nothing of %s in %s", name, artifacts)
			}
			n, err := count(dc, map[string]string{kindtest.LabelCluster: name})
			if err != nil {
				t.Fatal(err)
			}
			if keep == "never" {
				if n != 0 {
					t.Errorf("%d object(s) left", n)
				}
				return
			}
			defer kindtest.DeleteCluster(context.Background(), name)
			if n == 0 {
				t.Fatal("KINDTEST_KEEP=on-failure did not keep the panicking test's cluster")
			}
			// Kept on the engine, so that no sweep or reaper takes it.
			list, err := kindtest.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(list, func(ci kindtest.ClusterInfo) bool { return ci.Name == name && ci.Kept }) {
				t.Errorf("cluster %s not marked kept: %+v", name, list)
			}
			pruneOrphans(t, name)
			if n, _ := count(dc, map[string]string{kindtest.LabelCluster: name}); n == 0 {
				t.Error("the sweep removed a kept cluster")
			}
		})
	}
}

func TestGinkgoInterrupt(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	bin := filepath.Join(t.TempDir(), "suite.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "./kindtest/testdata/ginkgointerrupt")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the suite: %v\n%s", err, out)
	}
	for _, reaper := range []string{"on", "off"} {
		t.Run("reaper="+reaper, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.v", "-ginkgo.v")
			cmd.Env = append(os.Environ(), "KINDTEST_REAPER="+reaper)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var buf strings.Builder
			running := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				sc := bufio.NewScanner(out)
				once := sync.Once{}
				for sc.Scan() {
					buf.WriteString(sc.Text() + "\n")
					if strings.Contains(sc.Text(), "SPEC RUNNING") {
						once.Do(func() { close(running) })
					}
				}
			}()
			select {
			case <-running:
			case <-done:
				t.Fatalf("the suite ended before its spec ran:\n%s", buf.String())
			case <-time.After(5 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatal("the spec did not start")
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			// The output to its end first: Wait closes the pipe.
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
			}
			_ = cmd.Wait()
			<-done
			output := buf.String()
			t.Logf("suite output:\n%s", output)
			if !strings.Contains(output, "Interrupted by User") {
				t.Error("Ginkgo's interrupt report is missing")
			}
			if !strings.Contains(output, "DEFERCLEANUP RAN") {
				t.Error("the suite's DeferCleanup did not run")
			}
			m := regexp.MustCompile(`SUITE cluster=(\S+)`).FindStringSubmatch(output)
			if m == nil {
				t.Fatal("the suite did not create its cluster")
			}
			// Removed by the suite's own cleanup, before the process ended.
			if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: m[1]}); n != 0 {
				t.Errorf("%d object(s) of the suite's cluster left", n)
			}
		})
	}
}
