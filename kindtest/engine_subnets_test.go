package kindtest_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// TestSubnets runs a control plane and a worker on pod and Service
// ranges of the test's choosing: each pod's address is in its node's /24
// of the pod range, the API server's Service and the cluster DNS are the
// first and tenth addresses of the Service range, and a Service answers by
// its DNS name from a pod on each node. A pod range that overlaps the
// network the engine gave the nodes is refused once that network exists,
// naming both, with nothing left.
func TestSubnets(t *testing.T) {
	dc := engine(t)
	echo, manifest := echoApp(t)

	t.Run("chosen ranges", func(t *testing.T) {
		c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithPodSubnet("10.123.0.0/20"), kindtest.WithServiceSubnet("10.124.0.0/20"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		pods := deployEcho(ctx, t, c, echo, manifest)
		nodeRange := map[string]netip.Prefix{
			c.ControlPlane().Name(): netip.MustParsePrefix("10.123.0.0/24"),
			c.Workers()[0].Name():   netip.MustParsePrefix("10.123.1.0/24"),
		}
		for _, p := range pods {
			if ip, err := netip.ParseAddr(p.ip); err != nil || !nodeRange[p.node].Contains(ip) {
				t.Errorf("pod %s on %s has address %s, want one in %s", p.name, p.node, p.ip, nodeRange[p.node])
			}
		}
		res, err := c.Kubectl(ctx, "get", "services", "-A", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.clusterIP}{" "}{end}`)
		if err != nil || !strings.Contains(res.Stdout, "kubernetes=10.124.0.1 ") || !strings.Contains(res.Stdout, "kube-dns=10.124.0.10 ") {
			t.Errorf("Service addresses %q (%v): want kubernetes=10.124.0.1 and kube-dns=10.124.0.10", res.Stdout, err)
		}
		checkServiceDNS(ctx, t, c, pods)
		out, err := c.PodExec(ctx, "default", pods[0].name, "", "/echo", "lookup", "kubernetes.default.svc.cluster.local")
		if err != nil || strings.TrimSpace(out.Stdout) != "10.124.0.1" {
			t.Errorf("lookup kubernetes.default: %q %v", out.Stdout, err)
		}
	})

	t.Run("overlaps the nodes' network", func(t *testing.T) {
		// Docker's default pools are 172.17.0.0/16 to 172.31.0.0/16, then
		// 192.168.0.0/16 in /20s: a pod range of 172.16.0.0/12 and a
		// Service range over 192.168.0.0/16 overlap whatever it picks.
		// Podman's are /24s of 10.89.0.0/16 and up, which 10.0.0.0/8
		// holds.
		pods := "172.16.0.0/12"
		if dc.Podman() {
			pods = "10.0.0.0/8"
		}
		hook := &phaseHook{t: t, fn: func(string) {}}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := kindtest.New(ctx, kindtest.WithImage(nodeImage(t, dc)), kindtest.WithPodSubnet(pods), kindtest.WithServiceSubnet("192.168.0.0/16"), kindtest.WithLogger(hook))
		if err == nil {
			c.Delete(context.Background())
			t.Fatal("a pod range over the nodes' network was accepted")
		}
		t.Logf("refused: %v", err)
		for _, want := range []string{"the nodes' network " + hook.name, "overlaps the", "subnet with With"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); hook.name == "" || n != 0 {
			t.Errorf("cluster %q: %d resource(s) left after the refused creation", hook.name, n)
		}
	})
}
