package kindtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// TestControlPlanes makes one cluster of three control planes and a
// worker, and checks that the API stays available through the load
// balancer while the first control plane is stopped. The cluster is
// described as a kind configuration would describe it, three nodes of
// role control-plane and a worker: that is WithControlPlanes(3) and
// WithWorkers(1) (TestKindConfigOption checks the two configurations are
// the same).
func TestControlPlanes(t *testing.T) {
	dc := engine(t)
	began := time.Now()
	c := start(t, dc, kindtest.WithKindConfig([]byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: control-plane
- role: control-plane
- role: worker
`)))
	t.Logf("3 control planes + 1 worker ready in %v", time.Since(began).Round(time.Millisecond))
	for _, p := range c.Timings() {
		t.Logf("  phase %s: %v", p.Phase, p.Duration.Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cps := c.ControlPlanes()
	if len(cps) != 3 || cps[0] != c.ControlPlane() || len(c.Workers()) != 1 || len(c.Nodes()) != 4 {
		t.Fatalf("nodes: %d control planes, %d workers, %d nodes", len(cps), len(c.Workers()), len(c.Nodes()))
	}
	api := func(ctx context.Context, method, path string, body, out any) error {
		return kindtest.APIRequestForTest(ctx, c.Kubeconfig(), method, path, body, out)
	}
	var total uint64
	for _, n := range c.Nodes() {
		m, err := n.MemoryUsage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += m
		t.Logf("memory of %s: %d MiB", n.Name(), m>>20)
	}
	t.Logf("memory of all nodes: %d MiB", total>>20)

	t.Run("all nodes ready, kubeconfig through the load balancer", func(t *testing.T) {
		ready := readyNodes(ctx, t, api)
		for _, n := range c.Nodes() {
			if !ready[n.Name()] {
				t.Errorf("node %s is not Ready (ready: %v)", n.Name(), ready)
			}
		}
		lb, err := dc.InspectContainer(ctx, c.Name()+"-lb")
		if err != nil {
			t.Fatalf("load balancer container: %v", err)
		}
		if lb.Labels[kindtest.LabelRole] != kindtest.RoleLoadBalancer || lb.Labels[kindtest.LabelCluster] != c.Name() {
			t.Errorf("load balancer labels: %v", lb.Labels)
		}
		if want := "https://" + lb.Ports["6443/tcp"]; c.APIServer() != want {
			t.Errorf("APIServer() = %s, want the load balancer's published port %s", c.APIServer(), want)
		}
		if !strings.Contains(string(c.Kubeconfig()), "server: "+c.APIServer()+"\n") {
			t.Errorf("kubeconfig's server is not %s:\n%s", c.APIServer(), c.Kubeconfig())
		}
		for _, n := range cps {
			checkServingCertificates(ctx, t, n)
			info, err := dc.InspectContainer(ctx, n.ID())
			if err != nil {
				t.Fatal(err)
			}
			if p := info.Ports["6443/tcp"]; p != "" {
				t.Errorf("control plane %s publishes the API server itself at %s", n.Name(), p)
			}
		}
		// Within the cluster, workers' kubelets and kube-proxy reach the
		// API through the load balancer; a control plane's kubelet talks
		// to its own API server (kubeadm's way since 1.31).
		lbAddr := lb.IPs[c.Name()] + ":6443"
		for _, n := range c.Nodes() {
			res, err := n.Exec(ctx, "grep", "server:", "/etc/kubernetes/kubelet.conf")
			if err != nil {
				t.Fatal(err)
			}
			want := lbAddr
			if n.Role() == kindtest.RoleControlPlane {
				want = n.IP() + ":6443"
			}
			if !strings.Contains(res.Stdout, "https://"+want+"\n") {
				t.Errorf("kubelet of %s talks to %s, want %s", n.Name(), strings.TrimSpace(res.Stdout), want)
			}
		}
		var cm struct{ Data map[string]string }
		if err := api(ctx, "GET", "/api/v1/namespaces/kube-system/configmaps/kube-proxy", nil, &cm); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(cm.Data["kubeconfig.conf"], "server: https://"+lbAddr+"\n") {
			t.Errorf("kube-proxy does not go through the load balancer %s:\n%s", lbAddr, cm.Data["kubeconfig.conf"])
		}
	})

	t.Run("List and Attach", func(t *testing.T) {
		infos, err := kindtest.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ci := range infos {
			if ci.Name == c.Name() && ci.Nodes != 4 {
				t.Errorf("List: %d nodes, want 4 (the load balancer is not a node)", ci.Nodes)
			}
		}
		a, err := kindtest.Attach(ctx, c.Name())
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if len(a.ControlPlanes()) != 3 || len(a.Workers()) != 1 || a.ControlPlane().Name() != c.ControlPlane().Name() {
			t.Errorf("attached: %d control planes (first %s), %d workers", len(a.ControlPlanes()), a.ControlPlane().Name(), len(a.Workers()))
		}
		if a.APIServer() != c.APIServer() {
			t.Errorf("attached APIServer() = %s, want %s", a.APIServer(), c.APIServer())
		}
		if _, err := a.Kubectl(ctx, "get", "nodes"); err != nil {
			t.Errorf("attached Kubectl: %v", err)
		}
	})

	t.Run("etcd has three members", func(t *testing.T) {
		members := etcdMembers(ctx, t, cps[1])
		if len(members) != 3 {
			t.Fatalf("etcd members: %v, want one per control plane", members)
		}
		for _, n := range cps {
			if !strings.Contains(strings.Join(members, " "), n.Name()) {
				t.Errorf("no etcd member for %s: %v", n.Name(), members)
			}
		}
	})

	t.Run("API available with the first control plane stopped", func(t *testing.T) {
		first := c.ControlPlane()
		stopped := time.Now()
		if err := first.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("first control plane stopped in %v", time.Since(stopped).Round(time.Millisecond))
		// Fresh connections through the load balancer are answered
		// by the other two control planes.
		var last error
		var answered time.Duration
		for i := 0; ; i++ {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			last = api(rctx, "GET", "/readyz", nil, nil)
			rcancel()
			if last == nil {
				answered = time.Since(stopped)
				break
			}
			if time.Since(stopped) > 60*time.Second {
				t.Fatalf("API through the load balancer with %s stopped: %v", first.Name(), last)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("API ready through the load balancer %v after the stop began", answered.Round(time.Millisecond))
		for range 10 {
			var nl struct{ Items []any }
			if err := api(ctx, "GET", "/api/v1/nodes", nil, &nl); err != nil || len(nl.Items) != 4 {
				t.Fatalf("list nodes with %s stopped: %d nodes, %v", first.Name(), len(nl.Items), err)
			}
		}
		// Kubectl runs in a control plane that runs.
		if _, err := c.Kubectl(ctx, "get", "nodes"); err != nil {
			t.Fatalf("Kubectl with the first control plane stopped: %v", err)
		}
		// A new pod is scheduled (a scheduler elsewhere takes the lease)
		// and runs.
		pod := map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "while-cp-down", "namespace": "default"},
			"spec": map[string]any{"containers": []any{map[string]any{
				"name": "pause", "image": "registry.k8s.io/pause:3.10.2", "imagePullPolicy": "Never",
			}}},
		}
		if err := api(ctx, "POST", "/api/v1/namespaces/default/pods", pod, nil); err != nil {
			t.Fatalf("create a pod with %s stopped: %v", first.Name(), err)
		}
		created := time.Now()
		var phase, node string
		for {
			var p struct {
				Spec   struct{ NodeName string }
				Status struct{ Phase string }
			}
			err := api(ctx, "GET", "/api/v1/namespaces/default/pods/while-cp-down", nil, &p)
			phase, node = p.Status.Phase, p.Spec.NodeName
			if err == nil && phase == "Running" {
				break
			}
			if time.Since(created) > 2*time.Minute {
				t.Fatalf("pod not running with %s stopped: phase %q on %q, %v", first.Name(), phase, node, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("pod Running on %s %v after creation", node, time.Since(created).Round(time.Millisecond))

		restarted := time.Now()
		if err := first.Start(ctx); err != nil {
			t.Fatalf("start %s again: %v", first.Name(), err)
		}
		t.Logf("first control plane started and Ready in %v", time.Since(restarted).Round(time.Millisecond))
		if ready := readyNodes(ctx, t, api); !ready[first.Name()] {
			t.Errorf("%s not Ready after Start", first.Name())
		}
		// Its etcd member is back and healthy.
		members := etcdMembers(ctx, t, first)
		if len(members) != 3 {
			t.Errorf("etcd members after restart: %v", members)
		}
		var health string
		err := waitUntil(ctx, 2*time.Minute, func() bool {
			res, err := first.Exec(ctx, append(etcdCurl, "https://127.0.0.1:2379/health")...)
			health = res.Stdout
			return err == nil && strings.Contains(res.Stdout, `"health":"true"`)
		})
		if err != nil {
			t.Errorf("etcd on %s not healthy after restart: %q", first.Name(), health)
		}
	})
}

// etcdCurl queries a control plane's local etcd with kubeadm's
// health-check client certificate.
var etcdCurl = []string{"curl", "-sS", "--max-time", "10",
	"--cacert", "/etc/kubernetes/pki/etcd/ca.crt",
	"--cert", "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
	"--key", "/etc/kubernetes/pki/etcd/healthcheck-client.key"}

// etcdMembers lists etcd's members, by name, as node n's etcd sees them.
func etcdMembers(ctx context.Context, t *testing.T, n *kindtest.Node) []string {
	t.Helper()
	res, err := n.Exec(ctx, append(etcdCurl, "-X", "POST", "-d", "{}", "https://127.0.0.1:2379/v3/cluster/member/list")...)
	if err != nil {
		t.Fatalf("etcd member list on %s: %v", n.Name(), err)
	}
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &list); err != nil {
		t.Fatalf("etcd member list on %s: %v: %q", n.Name(), err, res.Stdout)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	return names
}

// readyNodes returns which nodes report Ready.
func readyNodes(ctx context.Context, t *testing.T, api func(context.Context, string, string, any, any) error) map[string]bool {
	t.Helper()
	var nl struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				Conditions []struct{ Type, Status string }
			}
		}
	}
	if err := api(ctx, "GET", "/api/v1/nodes", nil, &nl); err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	ready := map[string]bool{}
	for _, n := range nl.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready[n.Metadata.Name] = true
			}
		}
	}
	return ready
}

// waitUntil polls cond every half second until it holds or d passes.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v", d)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}
