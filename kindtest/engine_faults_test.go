package kindtest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/kindtest"
)

func TestMissingImage(t *testing.T) {
	engine(t)
	before := clusterNames(t)
	_, err := kindtest.New(context.Background(), kindtest.WithImage("kindtest/no-such-node:v0"))
	if err == nil || !strings.Contains(err.Error(), "kindtest/no-such-node:v0") || !strings.Contains(err.Error(), "cmd/kindtest build") {
		t.Fatalf("got %v, want an error naming the image and how to build one", err)
	}
	if after := clusterNames(t); len(after) > len(before) {
		t.Errorf("clusters before %v, after %v", before, after)
	}
}

// A node image of another architecture than the engine's is refused
// before anything is created, saying which platforms do not match.
func TestForeignPlatformImageRefused(t *testing.T) {
	dc := engine(t)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	ref := fmt.Sprintf("kindtest/foreign-node-%s:%x", other, suffix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := dc.LoadImages(ctx, bytes.NewReader(ociArchive(t, ref, buildHello(t), []string{other}, false))); err != nil {
		t.Fatalf("docker load: %v", err)
	}
	t.Cleanup(func() { _ = dc.RemoveImage(context.Background(), ref) })
	before := clusterNames(t)
	_, err := kindtest.New(ctx, kindtest.WithImage(ref))
	for _, want := range []string{ref, "is for linux/" + other, "runs linux/" + runtime.GOARCH, "emulation"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with a linux/%s node image: %v, want it to say %q", other, err, want)
		}
	}
	if after := clusterNames(t); len(after) > len(before) {
		t.Errorf("clusters before %v, after %v", before, after)
	}
}

func clusterNames(t *testing.T) map[string]bool {
	t.Helper()
	cs, err := kindtest.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range cs {
		out[c.Name] = true
	}
	return out
}

// phaseHook is a logger that runs fn once when a line contains marker.
type phaseHook struct {
	t      *testing.T
	marker string
	fn     func(line string)
	once   sync.Once
	name   string
}

func (h *phaseHook) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	h.t.Log(line)
	if after, ok := strings.CutPrefix(line, "kindtest: creating cluster "); ok {
		h.name = strings.Fields(after)[0]
	}
	if strings.Contains(line, h.marker) {
		h.once.Do(func() { h.fn(line) })
	}
}

func TestCancelAtEachPhase(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	for _, phase := range []string{"creating cluster", "network done", "containers done", "provision done", "boot done", "init done", "join done"} {
		t.Run(phase, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hook := &phaseHook{t: t, marker: phase, fn: func(string) { cancel() }}
			c, err := kindtest.New(ctx, kindtest.WithImage(img), kindtest.WithWorkers(1), kindtest.WithLogger(hook))
			if err == nil {
				c.Delete(context.Background())
				t.Fatal("creation went on after its context was cancelled")
			}
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cancelled") {
				t.Errorf("error %v does not say creation was cancelled", err)
			}
			if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
				t.Errorf("%d resources left after cancelling at %q", n, phase)
			}
		})
	}
}

func TestNodeKilledDuringCreate(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	var hook *phaseHook
	hook = &phaseHook{t: t, marker: "containers done", fn: func(string) {
		if err := dc.KillContainer(context.Background(), hook.name+"-worker", "SIGKILL"); err != nil {
			t.Error(err)
		}
	}}
	_, err := kindtest.New(context.Background(), kindtest.WithImage(img), kindtest.WithWorkers(1), kindtest.WithoutKubernetes(), kindtest.WithLogger(hook))
	var ne *kindtest.NodeError
	if !errors.As(err, &ne) || ne.Node != hook.name+"-worker" {
		t.Fatalf("got %v, want a NodeError for the killed worker", err)
	}
	t.Logf("error: %v", err)
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

// runChild starts this test binary as a child test process that creates a
// cluster under the given session, and returns it with a channel of its
// output lines.
func runChild(t *testing.T, session string) (*exec.Cmd, <-chan string) {
	t.Helper()
	return runChildEnv(t, childEnv+"=create", "KINDTEST_SESSION="+session)
}

// runChildEnv is runChild with the child's environment given: its mode
// (childEnv) and what the mode needs.
func runChildEnv(t *testing.T, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			t.Log("child: " + sc.Text())
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// waitLine waits for the child's line that contains marker and returns
// the lines before it.
func waitLine(t *testing.T, lines <-chan string, marker string) []string {
	t.Helper()
	before, _ := waitMarker(t, lines, marker)
	return before
}

// waitLineRest waits for the child's line that contains marker and
// returns what follows the marker on it.
func waitLineRest(t *testing.T, lines <-chan string, marker string) string {
	t.Helper()
	_, rest := waitMarker(t, lines, marker)
	return rest
}

func waitMarker(t *testing.T, lines <-chan string, marker string) (before []string, rest string) {
	t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child ended before printing %q", marker)
			}
			if _, rest, found := strings.Cut(l, marker); found {
				return before, rest
			}
			before = append(before, l)
		case <-timeout:
			t.Fatalf("child did not print %q", marker)
		}
	}
}

func TestKilledProcessLeavesNothing(t *testing.T) {
	dc := engine(t)
	if _, err := dc.InspectImage(context.Background(), kindtest.ReaperImage); err != nil {
		t.Fatalf("reaper image: %v (build it with `go run ./cmd/kindtest build`)", err)
	}
	nodeImage(t, dc)
	session := fmt.Sprintf("killtest%d", time.Now().UnixNano()%1e9)
	cmd, lines := runChild(t, session)
	// Mid-create: the containers exist, systemd has not booted.
	before := waitLine(t, lines, "containers done")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	// Only a cluster the child registered with a reaper can go within
	// the bound: without one, the next Start's sweep takes it.
	for _, l := range before {
		if strings.Contains(l, "no reaper watches") {
			t.Fatalf("the child had no reaper, so nothing removes its cluster now: %s", l)
		}
	}
	t.Logf("SIGKILL at %s", killed.UTC().Format("15:04:05.000"))
	sel := map[string]string{kindtest.LabelSession: session, kindtest.LabelCluster: ""}
	if leftovers(t, dc, sel) == 0 {
		t.Fatal("nothing to reap: the child was killed too late to test the reaper")
	}
	for leftovers(t, dc, sel) > 0 {
		if time.Since(killed) > 30*time.Second {
			logReapers(t, dc)
			t.Fatalf("resources of the killed process still there after 30s")
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("everything removed %v after SIGKILL", time.Since(killed).Round(100*time.Millisecond))
}

// logReapers logs the last lines of every reaper container on the
// engine: when each client went and what it removed, with timestamps.
func logReapers(t *testing.T, dc *docker.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := dc.ListContainers(ctx, map[string]string{kindtest.LabelReaper: "true"})
	if err != nil {
		t.Logf("list reapers: %v", err)
		return
	}
	if len(list) == 0 {
		t.Log("no reaper container on the engine")
	}
	for _, r := range list {
		out, err := dc.ContainerLogs(ctx, r.ID, 40)
		t.Logf("reaper %s (%v), last lines:\n%s", r.Name, err, out)
	}
}

func TestPruneOrphans(t *testing.T) {
	dc := engine(t)
	ctx := context.Background()
	// A process that has ended owns one network; this process owns another.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	mk := func(name string, pid int) {
		labels := map[string]string{
			kindtest.LabelCluster: name, kindtest.LabelSession: "prunetest",
			kindtest.LabelOwnerHost: host, kindtest.LabelOwnerPID: fmt.Sprint(pid),
			kindtest.LabelKeep: "never", kindtest.LabelCreated: time.Now().UTC().Format(time.RFC3339),
		}
		if _, err := dc.CreateNetwork(ctx, name, labels, netip.Prefix{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dc.RemoveLabelled(context.Background(), map[string]string{kindtest.LabelCluster: name}) })
	}
	orphan := fmt.Sprintf("prune-orphan-%d", time.Now().UnixNano()%1e6)
	owned := fmt.Sprintf("prune-owned-%d", time.Now().UnixNano()%1e6)
	mk(orphan, dead.Process.Pid)
	mk(owned, os.Getpid())

	list, err := kindtest.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range list {
		if ci.Name == orphan && ci.OwnerAlive {
			t.Errorf("%s: owner %v reported alive", orphan, ci.Owner)
		}
		if ci.Name == owned && !ci.OwnerAlive {
			t.Errorf("%s: owner %v reported gone", owned, ci.Owner)
		}
	}
	removed := pruneOrphans(t, orphan, owned)
	got := strings.Join(removed, " ")
	if !strings.Contains(got, orphan) || strings.Contains(got, owned) {
		t.Errorf("pruned %v, want %s and not %s", removed, orphan, owned)
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: orphan}); n != 0 {
		t.Errorf("orphan not removed")
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: owned}); n != 1 {
		t.Errorf("owned network: %d left, want 1", n)
	}
}

func TestUnprivilegedEngine(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	// Docker registers plain runc as "runc" beside any default runtime. On a
	// host whose capability bounding set lacks one that Docker grants to
	// privileged containers (this build machine lacks CAP_SYS_RESOURCE and
	// runs dockerd with a runtime that drops it), plain runc cannot start a
	// privileged container: the failure kindtest must explain.
	// A marker that never appears: the hook only records the cluster name.
	hook := &phaseHook{t: t, marker: "\x00"}
	c, err := kindtest.New(context.Background(), kindtest.WithImage(img), kindtest.WithoutKubernetes(),
		kindtest.WithRuntimeForTest("runc"), kindtest.WithLogger(hook))
	if err == nil {
		c.Delete(context.Background())
		t.Skip("this host runs privileged containers under plain runc, so the failure cannot be produced here")
	}
	var ne *kindtest.NodeError
	if !errors.As(err, &ne) || ne.Step != "start container" || !strings.Contains(err.Error(), "--privileged") {
		t.Errorf("got %v, want a start failure that explains the need for privileged containers", err)
	}
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
		t.Errorf("%d resources left", n)
	}
}
