package kindtest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// podYAML is a pod running image on node (any node when ""), never pulled
// when pull is false.
func podYAML(name, image, node string, args ...string) []byte {
	y := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: 0\n", name)
	if node != "" {
		y += "  nodeName: " + node + "\n"
	}
	y += fmt.Sprintf("  containers:\n  - name: main\n    image: %s\n", image)
	if len(args) > 0 {
		y += "    args: [" + strings.Join(args, ", ") + "]\n"
	}
	return []byte(y)
}

// waitPodReady waits for a pod to be Ready, failing the test with what
// kubectl says about it otherwise.
func waitPodReady(ctx context.Context, t *testing.T, c *kindtest.Cluster, pod string) {
	t.Helper()
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=180s"); err != nil {
		desc, _ := c.Kubectl(ctx, "describe", "pod", pod)
		t.Fatalf("pod %s not Ready: %v\n%s", pod, err, desc.Stdout)
	}
}

// TestRegistryAndNodeRestart runs one 1+1 cluster with a registry: an
// image pushed from the host's engine runs in a pod, under its
// localhost:PORT name and through a mirror; the worker restarts and runs
// pods again; the control plane stops and starts and its API server
// answers again; Delete removes the registry with the rest.
func TestRegistryAndNodeRestart(t *testing.T) {
	dc := engine(t)
	ctx := t.Context()
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithRegistry(),
		kindtest.WithRegistryMirror("mirror.invalid", kindtest.RegistryEndpoint))
	addr := c.RegistryAddr()
	if !strings.HasPrefix(addr, "localhost:") {
		t.Fatalf("RegistryAddr() = %q, want localhost:PORT", addr)
	}
	registry := c.Name() + "-registry"
	worker := c.Workers()[0]

	t.Run("push and run", func(t *testing.T) {
		ref := addr + "/echo:test"
		t.Cleanup(func() { dc.RemoveImage(context.Background(), ref) })
		if err := dc.TagImage(ctx, echo, ref); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := dc.PushImage(ctx, ref, nil); err != nil {
			t.Fatalf("push through the engine to the cluster's registry: %v", err)
		}
		t.Logf("pushed %s in %v", ref, time.Since(start).Round(time.Millisecond))
		// The test process reaches it under the same name.
		resp, err := http.Get("http://" + addr + "/v2/_catalog")
		if err != nil {
			t.Fatalf("registry from the test process: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"echo"`) {
			t.Errorf("registry catalog %s lacks echo", body)
		}
		// The image is not on the nodes: the pod's node pulls it.
		if res, err := worker.Exec(ctx, "crictl", "images", "-q", ref); err == nil && strings.TrimSpace(res.Stdout) != "" {
			t.Fatalf("%s is on %s before any pull", ref, worker.Name())
		}
		if err := c.Apply(ctx, podYAML("from-registry", ref, "")); err != nil {
			t.Fatal(err)
		}
		// Through the mirror: a registry name that does not exist, mapped
		// to the cluster's registry.
		if err := c.Apply(ctx, podYAML("from-mirror", "mirror.invalid/echo:test", c.ControlPlane().Name())); err != nil {
			t.Fatal(err)
		}
		waitPodReady(ctx, t, c, "from-registry")
		waitPodReady(ctx, t, c, "from-mirror")
		for _, n := range c.Nodes() {
			res, err := n.Exec(ctx, "cat", "/etc/containerd/certs.d/"+addr+"/hosts.toml")
			if err != nil || !strings.Contains(res.Stdout, "http://"+registry+":5000") {
				t.Errorf("%s: registry hosts.toml: %q, %v", n.Name(), res.Stdout, err)
			}
		}
	})

	t.Run("restart worker", func(t *testing.T) {
		if err := c.Apply(ctx, podYAML("before-restart", "registry.k8s.io/pause:3.10.2", worker.Name())); err != nil {
			t.Fatal(err)
		}
		waitPodReady(ctx, t, c, "before-restart")
		ip := worker.IP()
		start := time.Now()
		if err := worker.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("worker restarted and Ready in %v", time.Since(start).Round(time.Millisecond))
		if worker.IP() != ip {
			t.Errorf("worker address %s, was %s", worker.IP(), ip)
		}
		res, err := c.Kubectl(ctx, "get", "node", worker.Name(), "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}")
		if err != nil || res.Stdout != "True" {
			t.Fatalf("worker Ready=%q after Restart (%v)", res.Stdout, err)
		}
		// A new pod on it runs, from the registry again (its image store
		// survived), and so does the one from before.
		if err := c.Apply(ctx, podYAML("after-restart", addr+"/echo:test", worker.Name())); err != nil {
			t.Fatal(err)
		}
		waitPodReady(ctx, t, c, "after-restart")
		waitPodReady(ctx, t, c, "before-restart")
		// Pod networking across nodes works again: the control plane's
		// mirror pod answers the worker's pod.
		ipRes, err := c.Kubectl(ctx, "get", "pod", "from-mirror", "-o", "jsonpath={.status.podIP}")
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.PodExec(ctx, "default", "after-restart", "", "/echo", "get", "http://"+ipRes.Stdout+":8080/x")
		if err != nil || !strings.Contains(out.Stdout, "pod=") {
			t.Errorf("from the restarted worker's pod to the control plane's: %q, %v", out.Stdout, err)
		}
	})

	t.Run("stop and start control plane", func(t *testing.T) {
		cp := c.ControlPlane()
		stop := time.Now()
		if err := cp.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("control plane stopped in %v", time.Since(stop).Round(time.Millisecond))
		if _, err := c.Kubectl(ctx, "get", "nodes"); err == nil {
			t.Fatal("kubectl ran on a stopped control plane")
		}
		start := time.Now()
		if err := cp.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("control plane started and Ready in %v", time.Since(start).Round(time.Millisecond))
		// The API server answers on the host, at its (possibly new)
		// published address, and the whole cluster gets ready again.
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := client.Get(c.APIServer() + "/readyz")
		if err != nil {
			t.Fatalf("API server at %s after start: %v", c.APIServer(), err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("API server /readyz: %s", resp.Status)
		}
		if !strings.Contains(string(c.Kubeconfig()), "server: "+c.APIServer()) {
			t.Errorf("kubeconfig does not point at %s", c.APIServer())
		}
		ready := time.Now()
		if err := c.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("whole cluster ready %v later", time.Since(ready).Round(time.Millisecond))
		if _, err := c.Kubectl(ctx, "get", "pods"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("attach and list", func(t *testing.T) {
		other, err := kindtest.Attach(ctx, c.Name())
		if err != nil {
			t.Fatal(err)
		}
		if len(other.Nodes()) != 2 || other.RegistryAddr() != addr {
			t.Errorf("attached: %d nodes, registry %q; want 2 and %q", len(other.Nodes()), other.RegistryAddr(), addr)
		}
		// The attached handle's kubeconfig is its own, and goes with it.
		kc := other.KubeconfigPath()
		if kc == c.KubeconfigPath() {
			t.Errorf("attached handle shares the creator's kubeconfig %s", kc)
		}
		if _, err := os.Stat(kc); err != nil {
			t.Errorf("attached handle's kubeconfig: %v", err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Dir(kc)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Close left the attached handle's kubeconfig directory: %v", err)
		}
		if _, err := os.Stat(c.KubeconfigPath()); err != nil {
			t.Errorf("Close of another handle took the creator's kubeconfig: %v", err)
		}
		infos, err := kindtest.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ci := range infos {
			if ci.Name == c.Name() && ci.Nodes != 2 {
				t.Errorf("List counts %d nodes, want 2 (the registry is not a node)", ci.Nodes)
			}
		}
	})

	t.Run("killed attacher's kubeconfig", func(t *testing.T) {
		// A process killed with a handle open cannot remove its
		// kubeconfig; the sweep does, and leaves the cluster alone.
		cmd, lines := runChildEnv(t, childEnv+"=attach", childAttachEnv+"="+c.Name())
		kc := waitLineRest(t, lines, "child: attached, kubeconfig ")
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if _, err := os.Stat(kc); err != nil {
			t.Fatalf("the killed child's kubeconfig %q: %v; nothing to sweep", kc, err)
		}
		pruneOrphans(t, c.Name())
		if _, err := os.Stat(filepath.Dir(kc)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the sweep left the killed child's kubeconfig directory: %v", err)
		}
		if _, err := c.Kubectl(ctx, "get", "nodes"); err != nil {
			t.Errorf("the cluster after the sweep: %v", err)
		}
		if _, err := os.Stat(c.KubeconfigPath()); err != nil {
			t.Errorf("the sweep took the live creator's kubeconfig: %v", err)
		}
	})

	t.Run("address taken while stopped", func(t *testing.T) {
		// Another container joins the network while the worker is down
		// and gets its address: Start must say so, not boot a node the
		// cluster knows by another address.
		if err := worker.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		id, err := dc.CreateContainer(ctx, docker.ContainerSpec{Name: c.Name() + "-squatter", Image: kindtest.RegistryImage, Labels: c.Labels(), Network: c.Name()})
		if err != nil {
			t.Fatal(err)
		}
		if err := dc.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		info, err := dc.InspectContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.IPs[c.Name()] != worker.IP() {
			t.Skipf("the new container got %s, not the stopped worker's %s: nothing to check on this engine", info.IPs[c.Name()], worker.IP())
		}
		err = worker.Start(ctx)
		if err == nil || !strings.Contains(err.Error(), "changed from "+worker.IP()) {
			t.Fatalf("Start with the address taken: %v, want an error saying it changed", err)
		}
		t.Log(err)
		if info, err := dc.InspectContainer(ctx, worker.ID()); err != nil || info.Running {
			t.Errorf("worker container after the refused Start: running=%t (%v), want it stopped as before", info.Running, err)
		}
	})

	t.Run("delete removes the registry", func(t *testing.T) {
		if err := c.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := dc.InspectContainer(ctx, registry); err == nil {
			t.Errorf("registry container %s still there after Delete", registry)
		}
	})
}

// TestWithoutDefaultCNI brings a 1+1 cluster up without a pod network,
// then installs one as a user would (a bridge and host-local CNI
// configuration per node on the pod range the controller-manager gave it,
// routes between the nodes), and waits for the nodes and a pod.
func TestWithoutDefaultCNI(t *testing.T) {
	dc := engine(t)
	ctx := t.Context()
	c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithoutDefaultCNI())

	for _, n := range c.Nodes() {
		if _, err := n.Exec(ctx, "test", "-e", "/etc/cni/net.d/10-kindtest.conflist"); err == nil {
			t.Errorf("%s has kindtest's CNI configuration", n.Name())
		}
	}
	res, err := c.Kubectl(ctx, "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "=True") {
		t.Fatalf("a node is Ready without a CNI plugin: %s", res.Stdout)
	}
	t.Logf("before the CNI: %s", res.Stdout)

	// The user's CNI: what a simple CNI DaemonSet would write.
	cidrs := map[string]string{}
	for _, n := range c.Nodes() {
		res, err := c.Kubectl(ctx, "get", "node", n.Name(), "-o", "jsonpath={.spec.podCIDR}")
		if err != nil || res.Stdout == "" {
			t.Fatalf("%s has no pod range (%v): the controller-manager must allocate them", n.Name(), err)
		}
		cidrs[n.Name()] = res.Stdout
	}
	for _, n := range c.Nodes() {
		script := fmt.Sprintf(`set -e
cat > /etc/cni/net.d/10-user.conflist <<'EOF'
{"cniVersion": "1.0.0", "name": "user", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
`, cidrs[n.Name()])
		for _, o := range c.Nodes() {
			if o != n {
				script += fmt.Sprintf("ip route replace %s via %s\n", cidrs[o.Name()], o.IP())
			}
		}
		if _, err := n.Exec(ctx, "sh", "-c", script); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("nodes and CoreDNS ready %v after the CNI configuration was written", time.Since(start).Round(time.Millisecond))
	// The user's CNI brings its own NetworkPolicy enforcement, or none.
	assertNoPolicyAgent(ctx, t, c)
	if err := c.Apply(ctx, podYAML("on-user-cni", "registry.k8s.io/pause:3.10.2", c.Workers()[0].Name())); err != nil {
		t.Fatal(err)
	}
	waitPodReady(ctx, t, c, "on-user-cni")
	ip, err := c.Kubectl(ctx, "get", "pod", "on-user-cni", "-o", "jsonpath={.status.podIP}")
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSuffix(cidrs[c.Workers()[0].Name()], "0/24")
	if !strings.HasPrefix(ip.Stdout, prefix) {
		t.Errorf("pod IP %s is not in the worker's pod range %s", ip.Stdout, cidrs[c.Workers()[0].Name()])
	}
}

// TestReuseWithRegistry: a reusable cluster keeps its registry, and what
// was pushed to it, for the next run; a configuration without a registry
// does not attach to it.
func TestReuseWithRegistry(t *testing.T) {
	dc := engine(t)
	ctx := t.Context()
	opts := []kindtest.Option{kindtest.WithImage(nodeImage(t, dc)), kindtest.WithReuse(), kindtest.WithNamePrefix("reusereg"), kindtest.WithRegistry()}
	made := map[string]bool{}
	t.Cleanup(func() {
		for name := range made {
			if err := kindtest.DeleteCluster(context.Background(), name); err != nil {
				t.Error(err)
			}
		}
	})
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var first, addr string
	t.Run("first run pushes", func(t *testing.T) {
		c := kindtest.Start(t, opts...)
		first, addr = c.Name(), c.RegistryAddr()
		made[first] = true
		ref := addr + "/echo:kept"
		t.Cleanup(func() { dc.RemoveImage(context.Background(), ref) })
		if err := dc.TagImage(ctx, echo, ref); err != nil {
			t.Fatal(err)
		}
		if err := dc.PushImage(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("second run finds it", func(t *testing.T) {
		c := kindtest.Start(t, opts...)
		made[c.Name()] = true
		if c.Name() != first || c.RegistryAddr() != addr {
			t.Fatalf("second run: cluster %s registry %q, want %s and %q", c.Name(), c.RegistryAddr(), first, addr)
		}
		resp, err := http.Get("http://" + addr + "/v2/echo/tags/list")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "kept") {
			t.Errorf("tags of echo in the reused registry: %s", body)
		}
	})
	t.Run("without a registry, another cluster", func(t *testing.T) {
		c := kindtest.Start(t, opts[:3]...)
		made[c.Name()] = true
		if c.Name() == first || c.RegistryAddr() != "" {
			t.Fatalf("a run without WithRegistry got cluster %s, registry %q", c.Name(), c.RegistryAddr())
		}
	})
}
