package kindtest_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/kindtest"
)

// Tests of pools (NewPool, `kindtest pool`): claims from other processes,
// races between them, the ownership a claim moves, and the ends of a
// pool (Close, kill -9). The clusters are nodes only, so that many fit on
// the engine at once; TestPoolKubernetes claims a Kubernetes cluster.

var createdRe = regexp.MustCompile(`child: created (\S+)`)

// createdName is the cluster a child made or claimed.
func createdName(t *testing.T, c *childProc) string {
	t.Helper()
	m := createdRe.FindStringSubmatch(c.output())
	if m == nil {
		t.Fatalf("no cluster in the child's output:\n%s", c.output())
	}
	return m[1]
}

// poolClusters are the clusters that carry the pool's label.
func poolClusters(t *testing.T, dc *docker.Client, id string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	sel := map[string]string{kindtest.LabelPool: id}
	out := map[string]bool{}
	cs, err := dc.ListContainers(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		out[c.Labels[kindtest.LabelCluster]] = true
	}
	vs, err := dc.ListVolumes(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		out[v.Labels[kindtest.LabelCluster]] = true
	}
	ns, err := dc.ListNetworks(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		out[n.Labels[kindtest.LabelCluster]] = true
	}
	return out
}

// captured is a logger whose lines a test reads back.
type captured struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (l *captured) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.t.Log(line)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

func (l *captured) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// readyPool starts a pool, closed when the test ends, waits until it has
// size clusters ready, and points this process's New at it.
func readyPool(t *testing.T, cfg kindtest.PoolConfig, opts ...kindtest.Option) *kindtest.Pool {
	t.Helper()
	ctx := context.Background()
	p, err := kindtest.NewPool(ctx, cfg, append(opts, kindtest.WithLogger(&captured{t: t}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(ctx) })
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := p.WaitReady(wctx, cfg.Size); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KINDTEST_POOL", p.ID())
	return p
}

func TestPool(t *testing.T) {
	dc := engine(t)
	t.Setenv("KINDTEST_IMAGE", nodeImage(t, dc)) // for the children too
	ctx := context.Background()

	t.Run("invalid", func(t *testing.T) {
		for _, tc := range []struct {
			size int
			opts []kindtest.Option
			want string
		}{
			{0, nil, "size 0: want 1 to 8"},
			{kindtest.MaxPoolSize + 1, nil, "size 9: want 1 to 8"},
			{2, []kindtest.Option{kindtest.WithPortMapping(38080, 30080)}, "cannot publish the same host port"},
			{1, []kindtest.Option{kindtest.WithReuse()}, "a pool's clusters are fresh"},
			{1, []kindtest.Option{kindtest.WithWorkers(-1)}, "invalid options"},
		} {
			p, err := kindtest.NewPool(ctx, kindtest.PoolConfig{Size: tc.size}, append(childShape(), tc.opts...)...)
			if err == nil {
				p.Close(ctx)
				t.Errorf("NewPool(%d, %d options) made a pool", tc.size, len(tc.opts))
				continue
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewPool(%d): %v, want it to say %q", tc.size, err, tc.want)
			}
		}
		if n, err := count(dc, map[string]string{kindtest.LabelPool: ""}); err != nil || n != 0 {
			t.Errorf("%d pool object(s) after refused pools (%v)", n, err)
		}
	})

	t.Run("claims", func(t *testing.T) {
		p := readyPool(t, kindtest.PoolConfig{Size: 2}, childShape()...)

		// Another shape is made cold, and the log says why.
		other := &captured{t: t}
		c, err := kindtest.New(ctx, kindtest.WithoutKubernetes(), kindtest.WithNamePrefix("other"), kindtest.WithLogger(other))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Name(), "other-") || !other.has("not of this one's") {
			t.Errorf("cluster %s of another shape: want one made cold, with a log line that says the shapes differ", c.Name())
		}
		if err := c.Delete(ctx); err != nil {
			t.Fatal(err)
		}

		// Six processes claim at once; each gets a cluster of its own.
		var kids []*childProc
		for range 6 {
			k, err := startChild("hold", false, p.Env())
			if err != nil {
				t.Fatal(err)
			}
			kids = append(kids, k)
		}
		names := map[string]*childProc{}
		var claimed []string
		for _, k := range kids {
			if err := k.waitFor("child: created", 3*time.Minute); err != nil {
				t.Fatal(err)
			}
			name := createdName(t, k)
			if names[name] != nil {
				t.Errorf("cluster %s given to two processes", name)
			}
			names[name] = k
			if strings.Contains(k.output(), "claimed cluster "+name) {
				claimed = append(claimed, name)
			}
		}
		t.Logf("%d of 6 processes claimed a cluster: %v", len(claimed), claimed)
		if len(claimed) < 2 {
			t.Errorf("%d claims of 2 ready clusters", len(claimed))
		}
		for _, name := range claimed {
			cs, err := dc.ListContainers(ctx, map[string]string{kindtest.LabelCluster: name, kindtest.LabelRole: kindtest.RoleClaim})
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 || cs[0].Labels[kindtest.LabelSession] != names[name].session {
				t.Errorf("cluster %s: %d claim records, want one of session %s", name, len(cs), names[name].session)
			}
		}
		// The sweep goes by the claimer: a claimed cluster whose claimer
		// lives stays.
		pruneOrphans(t)

		// Closing the pool removes only what is unclaimed.
		if err := p.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		left := poolClusters(t, dc, p.ID())
		for _, name := range claimed {
			if !left[name] {
				t.Errorf("claimed cluster %s removed by the sweep or by its pool's Close", name)
			}
			delete(left, name)
		}
		if len(left) != 0 {
			t.Errorf("unclaimed clusters left after Close: %v", left)
		}
		if s := p.Stats(); s.Claimed != len(claimed) {
			t.Errorf("pool counts %d claims, the processes %d", s.Claimed, len(claimed))
		}

		// Each claimer ends its cluster as its own.
		for name, k := range names {
			k.stdin.Close()
			if err := k.wait(); err != nil {
				t.Errorf("child of %s: %v\n%s", name, err, k.output())
			}
			if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: name}); n != 0 {
				t.Errorf("cluster %s: %d object(s) left after its claimer deleted it", name, n)
			}
		}
	})

	t.Run("total", func(t *testing.T) {
		if _, err := kindtest.NewPool(ctx, kindtest.PoolConfig{Size: 1, Parallel: -1}, childShape()...); err == nil || !strings.Contains(err.Error(), "want 0 (the default) or more") {
			t.Errorf("Parallel -1: %v", err)
		}
		p := readyPool(t, kindtest.PoolConfig{Size: 1, Total: 1}, childShape()...)
		log := &captured{t: t}
		c, err := kindtest.New(ctx, append(childShape(), kindtest.WithLogger(log))...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Delete(ctx)
		if !log.has("claimed cluster " + c.Name()) {
			t.Fatal("New did not claim the pool's cluster")
		}
		// Handed over (the pool looks every 200 ms), and no replacement
		// past the total.
		for deadline := time.Now().Add(10 * time.Second); p.Stats().Claimed == 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second) // time for a replacement to start, were one made
		err = p.WaitReady(ctx, 1)
		if s := p.Stats(); err == nil || !strings.Contains(err.Error(), "it made the 1 it may make") || s.Made != 1 || s.Making != 0 || s.Claimed != 1 {
			t.Errorf("after its one claim: WaitReady %v, stats %+v; want no replacement", err, s)
		}
	})

	t.Run("shrinks", func(t *testing.T) {
		// Creations that fail (here: an OCI runtime the engine lacks; on
		// a user's engine, memory or inotify instances run out) shrink
		// the pool, which says why, instead of failing again and again.
		log := &captured{t: t}
		p, err := kindtest.NewPool(ctx, kindtest.PoolConfig{Size: 2}, append(childShape(), kindtest.WithRuntimeForTest("kindtest-no-such-runtime"), kindtest.WithLogger(log))...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := p.WaitReady(wctx, 2); err != nil {
			t.Fatal(err)
		}
		if s := p.Stats(); s.Size != 0 || s.Failed != 2 || s.Made != 0 || !log.has("the pool shrinks to 0") || !log.has("kindtest-no-such-runtime") {
			t.Errorf("after two failed creations: %+v; want a pool shrunk to 0 whose log names the cause", s)
		}
		if n := len(poolClusters(t, dc, p.ID())); n != 0 {
			t.Errorf("%d failed cluster(s) of the pool left", n)
		}
	})

	t.Run("two pools", func(t *testing.T) {
		// Two pools of one shape on one engine: a claim takes from the
		// pool its environment names, and from no other.
		a := readyPool(t, kindtest.PoolConfig{Size: 1, Total: 1}, childShape()...)
		b := readyPool(t, kindtest.PoolConfig{Size: 1, Total: 1}, childShape()...)
		for _, p := range []*kindtest.Pool{b, a} {
			t.Setenv("KINDTEST_POOL", p.ID())
			log := &captured{t: t}
			c, err := kindtest.New(ctx, append(childShape(), kindtest.WithLogger(log))...)
			if err != nil {
				t.Fatal(err)
			}
			if !log.has("claimed cluster "+c.Name()+" from pool "+p.ID()) || !poolClusters(t, dc, p.ID())[c.Name()] {
				t.Errorf("KINDTEST_POOL=%s: cluster %s is not that pool's", p.ID(), c.Name())
			}
			if err := c.Delete(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("kill", func(t *testing.T) {
		pc, err := startChild("pool", false)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.end(syscall.SIGKILL)
		if err := pc.waitFor("child: pool ready", 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		env := regexp.MustCompile(`KINDTEST_POOL=\S+`).FindString(pc.output())
		id := strings.TrimPrefix(env, "KINDTEST_POOL=")
		holder, err := startChild("hold", false, env)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.end(syscall.SIGKILL)
		if err := holder.waitFor("child: created", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		name := createdName(t, holder)
		if !strings.Contains(holder.output(), "claimed cluster "+name) {
			t.Fatalf("the holder did not claim from a ready pool:\n%s", holder.output())
		}

		// kill -9 of the pool: its reaper removes what is unclaimed,
		// within 30 s, and leaves the claimed cluster to its claimer.
		killed := time.Now()
		pc.end(syscall.SIGKILL)
		for {
			left := poolClusters(t, dc, id)
			if len(left) == 1 && left[name] {
				t.Logf("the pool's unclaimed clusters were gone %v after kill -9", time.Since(killed).Round(100*time.Millisecond))
				break
			}
			if !left[name] {
				t.Fatalf("the claimed cluster %s was removed with its dead pool", name)
			}
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("30 s after kill -9 of the pool, its clusters %v are left", left)
			}
			time.Sleep(200 * time.Millisecond)
		}
		pruneOrphans(t)
		if cs, err := dc.ListContainers(ctx, map[string]string{kindtest.LabelCluster: name, kindtest.LabelNodeIndex: "0"}); err != nil || len(cs) != 1 || !cs[0].Running {
			t.Fatalf("claimed cluster %s after its pool died and a sweep: %v %v", name, cs, err)
		}

		// A claim from the dead pool makes a cluster cold, and says why.
		late, err := startChild("cycle", false, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := late.waitFor("child: deleted", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if out := late.output(); !strings.Contains(out, "cold") || strings.Contains(out, "claimed cluster") {
			t.Errorf("a claim from a dead pool: want a cold creation that says why:\n%s", out)
		}
		late.end(syscall.SIGKILL)

		// kill -9 of the claimer: its reaper removes the cluster whole,
		// the objects its pool made included.
		killed = time.Now()
		holder.end(syscall.SIGKILL)
		for {
			n, err := count(dc, map[string]string{kindtest.LabelCluster: name})
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Logf("claimed cluster %s gone %v after kill -9 of its claimer", name, time.Since(killed).Round(100*time.Millisecond))
				break
			}
			if time.Since(killed) > 30*time.Second {
				leftovers(t, dc, map[string]string{kindtest.LabelCluster: name})
				t.Fatalf("30 s after kill -9 of its claimer, cluster %s has %d object(s) left", name, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// TestPoolKubernetes claims a Kubernetes cluster with Start, as a test
// under `kindtest pool` does, and runs a workload on it.
func TestPoolKubernetes(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	ctx := context.Background()
	readyPool(t, kindtest.PoolConfig{Size: 1}, kindtest.WithImage(img))
	log := &captured{t: t}
	begin := time.Now()
	c := start(t, dc, kindtest.WithLogger(log))
	t.Logf("Start claimed in %v", time.Since(begin).Round(time.Millisecond))
	if !log.has("claimed cluster " + c.Name()) {
		t.Fatalf("Start made a cluster instead of claiming the pool's")
	}
	image, manifest := echoApp(t)
	pods := deployEcho(ctx, t, c, image, manifest)
	checkServiceDNS(ctx, t, c, pods)
}
