//go:build enginematrix

package placement_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/kindtest"
)

// placementTests run where the test process is not on the engine's host:
// readiness, kubeconfig, LoadImage, the reaper and the LoadBalancer
// Services' addresses must all work from there.
var placementTests = []string{"TestKubernetes", "TestLoadImagePlatforms", "TestKilledProcessLeavesNothing", "TestLoadBalancerServices"}

// TestRemoteEngine runs engine tests against a Docker 26 engine reached
// only over TCP, from a network namespace of the test's own joined to the
// engine's by a veth pair: kubeconfig, readiness and the reaper go through
// the engine's address, and a killed test process leaves nothing behind:
// its cluster goes within 30 s of a kill -9 (TestKilledProcessLeavesNothing
// in the remote namespace), and once every test process has ended, the
// reaper goes too.
func TestRemoteEngine(t *testing.T) {
	host := enginetest.Client(t)
	node := nodeImage(t, host)
	bin := enginetest.BuildTests(t, "./kindtest")
	e := enginetest.StartEngine(t, host, enginetest.EngineConfig{
		ListenTCP: true,
		Images:    []string{node, kindtest.ReaperImage, kindtest.LoadBalancerImage},
	})
	netns, ip := e.RemoteNetNS(t)
	env := []string{
		"DOCKER_HOST=tcp://" + ip + ":2375",
		"KINDTEST_IMAGE=" + node,
		"KINDTEST_TEST_API_HOST=" + ip,
		"CI=true",
	}
	t.Run("tests", func(t *testing.T) { enginetest.RunTests(t, netns, bin, env, placementTests) })
	t.Run("engine-goes-away", func(t *testing.T) { engineGoesAway(t, e, netns, bin, env) })
	t.Run("nothing-left", func(t *testing.T) { nothingLeft(t, e.Client) })
}

// nothingLeft checks that once every test process that used the engine
// has ended, however it ended, the engine is back to what it was before
// them within 30 s: no object of any cluster, and no reaper container
// (it exits once it has no client).
func nothingLeft(t *testing.T, dc *docker.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	for {
		var left []string
		for _, sel := range []map[string]string{{kindtest.LabelCluster: ""}, {kindtest.LabelReaper: "true"}} {
			cs, err := dc.ListContainers(ctx, sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				left = append(left, "container "+c.Name)
			}
		}
		vs, err := dc.ListVolumes(ctx, map[string]string{kindtest.LabelCluster: ""})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			left = append(left, "volume "+v.Name)
		}
		ns, err := dc.ListNetworks(ctx, map[string]string{kindtest.LabelCluster: ""})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			left = append(left, "network "+n.Name)
		}
		if len(left) == 0 {
			t.Logf("nothing of the test processes left on the engine %v after the last one ended", time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("still on the engine 30 s after the last test process ended: %s", strings.Join(left, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// engineGoesAway cuts a test process off the engine's API mid-create (the
// engine resets every connection to its port), checks that the create
// fails saying what happened, and that once the process is gone nothing of
// its cluster is left on the engine.
func engineGoesAway(t *testing.T, e *enginetest.Engine, netns, bin string, env []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+netns, "--", bin)
	cmd.Dir = filepath.Join(enginetest.RepoRoot(t), "kindtest")
	cmd.Env = append(enginetest.WithoutEngineEnv(os.Environ()), append(env, "KINDTEST_TEST_CHILD=create")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	block := []string{"iptables", "-I", "INPUT", "-p", "tcp", "--dport", "2375", "-j", "REJECT", "--reject-with", "tcp-reset"}
	unblock := append([]string{"iptables", "-D"}, block[2:]...)
	var output strings.Builder
	sc := bufio.NewScanner(out)
	blocked := false
	for sc.Scan() {
		line := sc.Text()
		output.WriteString(line + "\n")
		if !blocked && strings.Contains(line, "containers done") {
			if code, err := e.Exec(ctx, block...); err != nil || code != 0 {
				t.Fatalf("block the engine's port: exit %d, %v", code, err)
			}
			blocked = true
			t.Logf("engine port blocked after: %s", line)
		}
	}
	waitErr := cmd.Wait()
	if blocked {
		if code, err := e.Exec(context.Background(), unblock...); err != nil || code != 0 {
			t.Errorf("unblock the engine's port: exit %d, %v", code, err)
		}
	}
	if !blocked {
		t.Fatalf("the child never reached the containers phase (%v):\n%s", waitErr, output.String())
	}
	if waitErr == nil || !strings.Contains(output.String(), "stopped answering") {
		t.Fatalf("child exit %v, output:\n%s\nwant a failed create saying the engine stopped answering", waitErr, output.String())
	}
	t.Logf("child said:\n%s", output.String())
	// The child is gone: its reaper connection dropped with it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		left, err := e.Client.ListContainers(ctx, map[string]string{kindtest.LabelCluster: ""})
		if err != nil {
			t.Fatal(err)
		}
		nets, err := e.Client.ListNetworks(ctx, map[string]string{kindtest.LabelCluster: ""})
		if err != nil {
			t.Fatal(err)
		}
		if len(left)+len(nets) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d container(s) and %d network(s) of the cut-off process still on the engine after 60 s", len(left), len(nets))
		}
		time.Sleep(time.Second)
	}
}

// TestInContainer runs engine tests in a container of the host engine with
// the engine's socket mounted, as in a devcontainer or a CI job's
// container: the test process joins each cluster's network to reach its
// API server. A container that cannot join a network gets a clear error.
func TestInContainer(t *testing.T) {
	host := enginetest.Client(t)
	socket, ok := strings.CutPrefix(host.Host(), "unix://")
	if !ok {
		t.Fatalf("the in-container test mounts the engine's socket; the engine is at %s", host.Host())
	}
	node := nodeImage(t, host)
	image := enginetest.EnsureEngineImage(t, host, enginetest.Docker26)
	bin := enginetest.BuildStaticTests(t, "./kindtest")
	root := enginetest.RepoRoot(t)
	goroot, modcache, gocache := goEnv(t)
	binds := []string{
		socket + ":/var/run/docker.sock",
		root + ":" + root + ":ro",
		filepath.Dir(bin) + ":" + filepath.Dir(bin) + ":ro",
		goroot + ":" + goroot + ":ro",
		modcache + ":" + modcache + ":ro",
		gocache + ":" + gocache,
	}
	env := []string{
		"PATH=" + filepath.Join(goroot, "bin") + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "GOROOT=" + goroot, "GOMODCACHE=" + modcache, "GOCACHE=" + gocache,
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off",
		"CI=true", "KINDTEST_IMAGE=" + node, "KINDTEST_TEST_API_HOST=control-plane",
	}
	// The kubectl the node image build left, for the test's host kubectl
	// check (the library itself needs none).
	if cache, err := os.UserCacheDir(); err == nil {
		bin := filepath.Join(cache, "kindtest", "bin", kindtest.KubernetesVersion)
		if _, err := os.Stat(filepath.Join(bin, "kubectl")); err == nil {
			binds = append(binds, bin+":"+bin+":ro")
			env = append(env, "XDG_CACHE_HOME="+cache)
		}
	}

	t.Run("bridge", func(t *testing.T) {
		id := testContainer(t, host, image, "bridge", binds)
		r, w := io.Pipe()
		type result struct {
			code int
			err  error
		}
		done := make(chan result, 1)
		go func() {
			code, err := host.Exec(context.Background(), id, []string{bin,
				"-test.run", enginetest.RunPattern(placementTests), "-test.count=1", "-test.v", "-test.timeout=30m"},
				docker.ExecOptions{Stdout: w, Stderr: w, Env: env, Dir: filepath.Join(root, "kindtest")})
			w.Close()
			done <- result{code, err}
		}()
		passed, failed := enginetest.ScanResults(t, r)
		res := <-done
		err := res.err
		if err == nil && res.code != 0 {
			err = exitCode(res.code)
		}
		enginetest.CheckResults(t, err, placementTests, passed, failed)
	})

	t.Run("cannot-join", func(t *testing.T) {
		id := testContainer(t, host, image, "none", binds)
		var out strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// The test binary's child mode creates one cluster and reports.
		code, err := host.Exec(ctx, id, []string{bin}, docker.ExecOptions{
			Stdout: &out, Stderr: &out, Dir: filepath.Join(root, "kindtest"),
			Env: append(env, "KINDTEST_TEST_CHILD=create"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 || !strings.Contains(out.String(), "cannot join a cluster's network") {
			t.Fatalf("exit %d, output:\n%s\nwant a failure saying the container cannot join the cluster's network", code, out.String())
		}
		t.Logf("as expected: %s", strings.TrimSpace(out.String()))
	})
}

type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// testContainer runs an idle container (network mode "bridge" or "none")
// to exec test binaries in, removed when the test ends.
func testContainer(t *testing.T, host *docker.Client, image, network string, binds []string) string {
	t.Helper()
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	spec := docker.ContainerSpec{
		Name:       "kindtest-test-process-" + hex.EncodeToString(b[:]),
		Image:      image,
		Labels:     map[string]string{enginetest.LabelEngine: enginetest.OwnerID()},
		Entrypoint: []string{"sleep", "infinity"},
		Binds:      binds,
		Tmpfs:      map[string]string{"/tmp": ""},
	}
	if network == "none" {
		spec.Network = "none"
	}
	id, err := host.CreateContainer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := host.RemoveContainer(context.Background(), id); err != nil {
			t.Error(err)
		}
	})
	if err := host.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// nodeImage is the node image the tests use, which must exist on host.
func nodeImage(t *testing.T, host *docker.Client) string {
	t.Helper()
	node := kindtest.DefaultImage
	if v := strings.TrimSpace(os.Getenv("KINDTEST_IMAGE")); v != "" {
		node = v
	}
	for _, ref := range []string{node, kindtest.ReaperImage} {
		if _, err := host.InspectImage(context.Background(), ref); err != nil {
			t.Fatalf("%s: %v (build it with `go run ./cmd/kindtest build`)", ref, err)
		}
	}
	return node
}

// goEnv returns GOROOT, GOMODCACHE and GOCACHE of the go command.
func goEnv(t *testing.T) (goroot, modcache, gocache string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		t.Fatalf("go env: %q", out)
	}
	return f[0], f[1], f[2]
}
