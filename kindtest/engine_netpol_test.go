package kindtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// TestNetworkPolicy runs one cluster of a control plane and a worker, with
// the echo fixture serving on the worker, a client pod (the same image) on
// the control plane, whose requests cross nodes, and one on the worker,
// whose requests cross the worker's bridge: a default-deny
// ingress policy makes the request fail, an allow rule naming the client's
// namespace and labels restores it, and a deny-all egress policy on the
// client blocks it again. Start does not wait for the policy agent; the
// test does, and logs how long after Start it became ready and how much
// memory its processes hold.
func TestNetworkPolicy(t *testing.T) {
	dc := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, dc, kindtest.WithWorkers(1))
	started := time.Now()
	// The DaemonSet itself is created by the apply that Start left running.
	exists := func() bool {
		_, err := c.Kubectl(ctx, "-n", "kube-system", "get", "daemonset", kindtest.NetworkPolicyDaemonSet)
		return err == nil
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	if err := poll(wctx, exists); err != nil {
		t.Fatalf("no DaemonSet %s after 2 min: %v\n%s", kindtest.NetworkPolicyDaemonSet, err, agentDiagnostics(ctx, c))
	}
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/"+kindtest.NetworkPolicyDaemonSet, "--timeout=4m"); err != nil {
		t.Fatalf("policy agent: %v\n%s", err, agentDiagnostics(ctx, c))
	}
	t.Logf("policy agent ready on every node %s after Start returned", time.Since(started).Round(10*time.Millisecond))
	if err := c.LoadImage(ctx, echo); err != nil {
		t.Fatal(err)
	}

	ns := c.Namespace(t)
	cp, worker := c.ControlPlane(), c.Workers()[0]
	pods := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: server
  namespace: %[1]s
  labels: {app: server}
spec:
  nodeName: %[2]s
  containers:
  - name: echo
    image: %[4]s
    imagePullPolicy: Never
    args: [serve, -addr, ":8080"]
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata:
  name: client
  namespace: %[1]s
  labels: {app: client}
spec:
  nodeName: %[3]s
  tolerations:
  - operator: Exists
  containers:
  - name: echo
    image: %[4]s
    imagePullPolicy: Never
    args: [serve, -addr, ":8081"]
---
apiVersion: v1
kind: Pod
metadata:
  name: local-client
  namespace: %[1]s
  labels: {app: client}
spec:
  nodeName: %[2]s
  containers:
  - name: echo
    image: %[4]s
    imagePullPolicy: Never
    args: [serve, -addr, ":8081"]
`, ns, worker.Name(), cp.Name(), echo)
	if err := c.Apply(ctx, []byte(pods)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "-n", ns, "wait", "pod/server", "pod/client", "pod/local-client", "--for=condition=Ready", "--timeout=2m"); err != nil {
		t.Fatalf("pods: %v\n%s", err, describe(ctx, c, "-n", ns, "pod"))
	}
	ip, err := c.Kubectl(ctx, "-n", ns, "get", "pod", "server", "-o", "jsonpath={.status.podIP}")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ip.Stdout + ":8080/policy"
	// get makes one request from a client pod to the server pod; echo's
	// client gives up after 10 s.
	get := func(client string) error {
		res, err := c.Kubectl(ctx, "-n", ns, "exec", client, "--", "/echo", "get", url)
		if err != nil {
			return err
		}
		if !strings.Contains(res.Stdout, "pod=server") {
			return fmt.Errorf("answer %q is not the server's", res.Stdout)
		}
		return nil
	}
	// eventually waits until requests from the client on the other node
	// ("client") and from the one on the server's node ("local-client")
	// succeed (want true) or fail: the agent applies a policy within
	// seconds of its creation.
	var eventuallyFrom func(t *testing.T, client string, want bool, what string)
	eventually := func(t *testing.T, want bool, what string) {
		t.Helper()
		for _, client := range []string{"client", "local-client"} {
			eventuallyFrom(t, client, want, what)
		}
	}
	eventuallyFrom = func(t *testing.T, client string, want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		var err error
		for {
			err = get(client)
			if (err == nil) == want {
				if err == nil {
					t.Logf("%s: request from %s succeeds", what, client)
				} else {
					t.Logf("%s: request from %s fails: %s", what, client, lastLine(err))
				}
				return
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				state := "succeeding"
				if err != nil {
					state = "failing: " + err.Error()
				}
				t.Fatalf("%s: request from %s still %s after 90 s\n%s", what, client, state, agentDiagnostics(ctx, c))
			}
			time.Sleep(time.Second)
		}
	}
	apply := func(t *testing.T, manifest string) {
		t.Helper()
		if err := c.Apply(ctx, []byte(strings.ReplaceAll(manifest, "{{ns}}", ns))); err != nil {
			t.Fatal(err)
		}
	}

	eventually(t, true, "before any policy")

	t.Run("default deny ingress", func(t *testing.T) {
		apply(t, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny-ingress
  namespace: {{ns}}
spec:
  podSelector: {}
  policyTypes: [Ingress]
`)
		eventually(t, false, "default-deny ingress")
	})

	t.Run("allow rule", func(t *testing.T) {
		apply(t, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-client
  namespace: {{ns}}
spec:
  podSelector:
    matchLabels: {app: server}
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector:
        matchLabels: {kubernetes.io/metadata.name: {{ns}}}
      podSelector:
        matchLabels: {app: client}
    ports:
    - port: 8080
`)
		eventually(t, true, "default-deny ingress plus an allow rule for the client")
	})

	t.Run("deny egress", func(t *testing.T) {
		apply(t, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: client-deny-egress
  namespace: {{ns}}
spec:
  podSelector:
    matchLabels: {app: client}
  policyTypes: [Egress]
`)
		eventually(t, false, "deny-all egress on the client")
		if _, err := c.Kubectl(ctx, "-n", ns, "delete", "networkpolicy", "client-deny-egress"); err != nil {
			t.Fatal(err)
		}
		eventually(t, true, "egress policy deleted")
	})

	t.Run("agent memory", func(t *testing.T) {
		for _, n := range c.Nodes() {
			res, err := n.Exec(ctx, "sh", "-c", "for p in $(pgrep -f ^/usr/local/bin/kube-network-policies); do grep VmRSS /proc/$p/status; done")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Stdout, "VmRSS") {
				t.Fatalf("no policy agent process on %s", n.Name())
			}
			t.Logf("policy agent on %s: %s", n.Name(), strings.Join(strings.Fields(res.Stdout), " "))
		}
	})
}

// agentDiagnostics is what a failed policy assertion shows: the agent's
// pods and the last lines of their logs.
func agentDiagnostics(ctx context.Context, c *kindtest.Cluster) string {
	ctx = context.WithoutCancel(ctx)
	pods, _ := c.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-l", "app="+kindtest.NetworkPolicyDaemonSet, "-o", "wide")
	logs, _ := c.Kubectl(ctx, "-n", "kube-system", "logs", "-l", "app="+kindtest.NetworkPolicyDaemonSet, "--tail=20", "--prefix")
	return pods.Stdout + pods.Stderr + "\nagent logs:\n" + logs.Stdout + logs.Stderr
}

// lastLine returns the last non-empty line of err's message: for a failed
// kubectl exec, what the command printed last.
func lastLine(err error) string {
	lines := strings.Fields(strings.ReplaceAll(err.Error(), " ", "\x00"))
	if len(lines) == 0 {
		return ""
	}
	return strings.ReplaceAll(lines[len(lines)-1], "\x00", " ")
}

// TestWithoutNetworkPolicy checks that the option leaves the agent out
// while storage, applied by the same detached apply, still comes.
func TestWithoutNetworkPolicy(t *testing.T) {
	dc := engine(t)
	c := start(t, dc, kindtest.WithoutNetworkPolicy())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	assertNoPolicyAgent(ctx, t, c)
}

// assertNoPolicyAgent waits until the detached apply of the late add-ons
// has made the default StorageClass, then checks that kube-system has no
// DaemonSet but kube-proxy and that no agent manifest was written.
func assertNoPolicyAgent(ctx context.Context, t *testing.T, c *kindtest.Cluster) {
	t.Helper()
	if _, err := c.Kubectl(ctx, "wait", "--for=create", "storageclass/"+kindtest.StorageClassName, "--timeout=1m"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Kubectl(ctx, "-n", "kube-system", "get", "daemonsets", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(res.Stdout) != "daemonset.apps/kube-proxy" {
		t.Errorf("kube-system daemonsets: %q, want only kube-proxy", res.Stdout)
	}
	if _, err := c.ControlPlane().Exec(ctx, "test", "-e", "/etc/kindtest/network-policy.yaml"); err == nil {
		t.Error("the control plane has the policy agent's manifest")
	}
}
