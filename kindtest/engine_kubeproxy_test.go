package kindtest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// TestKubeProxyModes runs Services through kube-proxy's nftables mode on
// a control plane and a worker: a Service reached by its DNS name from a
// pod on each node, and a NodePort on each node, with kube-proxy's rules
// in nftables and none in iptables. Without kube-proxy (none) the
// cluster is ready and its pods reach each other, and nothing routes its
// Services. IPVS mode needs the kernel's IPVS on
// the engine's host: where it is missing (this build machine), creation
// fails before boot, saying what to load, and leaves nothing.
func TestKubeProxyModes(t *testing.T) {
	dc := engine(t)
	echo, manifest := echoApp(t)

	t.Run("nftables", func(t *testing.T) {
		c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithKubeProxyMode(kindtest.KubeProxyNFTables))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		pods := deployEcho(ctx, t, c, echo, manifest)
		res, err := c.Kubectl(ctx, "-n", "kube-system", "get", "configmap", "kube-proxy", "-o", "jsonpath={.data.config\\.conf}")
		if err != nil || !strings.Contains(res.Stdout, "mode: nftables") {
			t.Errorf("kube-proxy's configuration: %q %v", res.Stdout, err)
		}
		checkServiceDNS(ctx, t, c, pods)
		checkNodePorts(ctx, t, c, nil)
		for _, n := range c.Nodes() {
			// The Service's rules are nftables', not iptables'.
			rules, err := n.Exec(ctx, "sh", "-c", "iptables-save -t nat; ip6tables-save -t nat")
			if err != nil || strings.Contains(rules.Stdout, "KUBE-SVC-") {
				t.Errorf("%s: kube-proxy's iptables chains in nftables mode (%v):\n%s", n.Name(), err, rules.Stdout)
			}
		}
		// The node image has no nft of its own: read kube-proxy's table
		// from inside its pod, whose image brings nft.
		res, err = c.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy", "-o", "jsonpath={.items[0].metadata.name}")
		if err != nil {
			t.Fatal(err)
		}
		table, err := c.PodExec(ctx, "kube-system", res.Stdout, "", "nft", "list", "table", "ip", "kube-proxy")
		if err != nil || !strings.Contains(table.Stdout, "default/echo") {
			t.Errorf("nft list table ip kube-proxy: %q %v", table.Stdout, err)
		}
	})

	t.Run("none", func(t *testing.T) {
		// No kube-proxy, as for a test that installs its replacement:
		// the cluster is ready, pods reach each other across nodes by
		// address, and a Service gets its cluster IP and endpoints but
		// no rules that route it.
		c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithKubeProxyMode(kindtest.KubeProxyNone))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		pods := deployEcho(ctx, t, c, echo, manifest)
		res, err := c.Kubectl(ctx, "-n", "kube-system", "get", "daemonsets,configmaps", "-o", "name")
		if err != nil || strings.Contains(res.Stdout, "kube-proxy") || !strings.Contains(res.Stdout, "configmap/coredns") {
			t.Errorf("kube-system of a cluster without kube-proxy: %q %v", res.Stdout, err)
		}
		for _, a := range pods {
			for _, b := range pods {
				if a.node != b.node {
					getFromPod(ctx, t, c, a, "http://"+b.ip+":8080/direct", "path=/direct")
				}
			}
		}
		svc, err := c.Kubectl(ctx, "get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}")
		if err != nil || svc.Stdout == "" {
			t.Fatalf("the echo Service's cluster IP: %q %v", svc.Stdout, err)
		}
		eps, err := c.Kubectl(ctx, "get", "endpointslices", "-l", "kubernetes.io/service-name=echo", "-o", "jsonpath={.items[*].endpoints[*].addresses[*]}")
		if err != nil || len(strings.Fields(eps.Stdout)) != len(pods) {
			t.Errorf("the echo Service's endpoints: %q %v; want its %d pods", eps.Stdout, err, len(pods))
		}
		for _, n := range c.Nodes() {
			rules, err := n.Exec(ctx, "sh", "-c", "iptables-save; ip6tables-save")
			if err != nil || strings.Contains(rules.Stdout, "KUBE-SERVICES") || strings.Contains(rules.Stdout, svc.Stdout) {
				t.Errorf("%s: Service rules without kube-proxy (%v):\n%s", n.Name(), err, rules.Stdout)
			}
		}
	})

	t.Run("ipvs", func(t *testing.T) {
		// Containers share the host's kernel: IPVS is there when this
		// process's own network namespace has it.
		_, statErr := os.Stat("/proc/net/ip_vs")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		hook := &phaseHook{t: t, fn: func(string) {}}
		c, err := kindtest.New(ctx, kindtest.WithImage(nodeImage(t, dc)), kindtest.WithKubeProxyMode(kindtest.KubeProxyIPVS), kindtest.WithLogger(hook))
		if statErr == nil {
			if err != nil {
				t.Fatalf("the host has IPVS, but: %v", err)
			}
			defer c.Delete(context.Background())
			res, err := c.Kubectl(ctx, "-n", "kube-system", "get", "configmap", "kube-proxy", "-o", "jsonpath={.data.config\\.conf}")
			if err != nil || !strings.Contains(res.Stdout, "mode: ipvs") {
				t.Errorf("kube-proxy's configuration: %q %v", res.Stdout, err)
			}
			return
		}
		if err == nil {
			c.Delete(context.Background())
			t.Fatal("the host has no /proc/net/ip_vs, yet a cluster in IPVS mode was made")
		}
		t.Logf("refused: %v", err)
		for _, want := range []string{"kube-proxy mode ipvs", "no IPVS", "modprobe -a ip_vs", "KubeProxyNFTables"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); hook.name == "" || n != 0 {
			t.Errorf("cluster %q: %d resource(s) left after the refused creation", hook.name, n)
		}
	})
}
