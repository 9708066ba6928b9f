package kindtest_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// echo6Service is an IPv6 Service in front of the echo pods of a
// dual-stack cluster, whose Services are IPv4 unless they ask.
const echo6Service = `apiVersion: v1
kind: Service
metadata: {name: echo6, namespace: default}
spec:
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  selector: {app: echo}
  ports:
  - {port: 80, targetPort: 8080}
`

// TestIPFamilies runs a dual-stack and an IPv6-only cluster of a control
// plane and a worker, each on a network the engine gives IPv6:
//   - dual-stack: every node and pod has an address of each family; the
//     IPv4 Service and an IPv6 one answer by DNS name from the pods; from
//     the other node, the pods and the IPv6 Service answer over IPv6;
//   - IPv6: every node and pod has only an IPv6 address; the Service
//     answers by DNS name from the pods, the NodePort on each node's IPv6
//     address, a LoadBalancer Service and PortForward from the test
//     process, and the API server the test process's webhooks and
//     aggregated API (ServeHTTPS).
func TestIPFamilies(t *testing.T) {
	dc := engine(t)
	echo, manifest := echoApp(t)

	t.Run("dual", func(t *testing.T) {
		c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithIPFamily(kindtest.DualStack))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		checkNodeIPs(ctx, t, c, true, true)
		pods := deployEcho(ctx, t, c, echo, manifest, echo6Service)
		ips := checkPodIPs(ctx, t, c, "10.244.0.0/16", "fd00:10:244::/56")
		checkServiceDNS(ctx, t, c, pods)
		res, err := c.Kubectl(ctx, "get", "service", "echo6", "-o", "jsonpath={.spec.clusterIP}")
		svc6, perr := netip.ParseAddr(res.Stdout)
		if err != nil || perr != nil || !svc6.Is6() {
			t.Fatalf("Service echo6's cluster IP %q: %v %v", res.Stdout, err, perr)
		}
		for _, p := range pods {
			getFromPod(ctx, t, c, p, "http://echo6.default.svc.cluster.local/svc6", "path=/svc6")
		}
		// The pods run on the worker (the control plane is tainted): from
		// the control plane, each pod over IPv6 and the IPv6 Service, both
		// across nodes.
		urls := []string{"http://" + net.JoinHostPort(svc6.String(), "80") + "/svc6"}
		for _, p := range pods {
			urls = append(urls, "http://"+net.JoinHostPort(ips[p.name][1], "8080")+"/pod6")
		}
		for _, url := range urls {
			var out kindtest.ExecResult
			err := retry(ctx, func() (err error) {
				out, err = c.ControlPlane().Exec(ctx, "curl", "-sS", "--max-time", "5", url)
				return err
			})
			if err != nil || !strings.Contains(out.Stdout, "path=/") {
				t.Errorf("GET %s from the control plane: %q %v", url, out.Stdout, err)
			}
		}
	})

	t.Run("ipv6", func(t *testing.T) {
		c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithIPFamily(kindtest.IPv6))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		checkNodeIPs(ctx, t, c, false, true)
		pods := deployEcho(ctx, t, c, echo, manifest, lbService)
		checkPodIPs(ctx, t, c, "fd00:10:244::/56")
		checkServiceDNS(ctx, t, c, pods)
		checkNodePorts(ctx, t, c, (*kindtest.Node).IPv6)
		if err := c.Wait(ctx, "default", "service/echo-lb", kindtest.HasAddress); err != nil {
			t.Fatal(err)
		}
		addr, err := c.LoadBalancerAddr(ctx, "default", "echo-lb", 80)
		if err != nil {
			t.Fatal(err)
		}
		var body string
		err = retry(ctx, func() (err error) { body, err = httpGet(ctx, "http://"+addr+"/lb6"); return err })
		if err != nil || !strings.Contains(body, "path=/lb6") {
			t.Errorf("GET http://%s/lb6 through the load balancer: %q %v", addr, body, err)
		}
		// PortForward relays through the control plane to an IPv6 pod.
		local, stop, err := c.PortForward(ctx, "default", "deployment/echo", 8080)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		if body, err := httpGet(ctx, "http://"+local+"/pf6"); err != nil || !strings.Contains(body, "path=/pf6") {
			t.Errorf("GET http://%s/pf6 through PortForward: %q %v", local, body, err)
		}
		// The API server calls webhooks in the test process over IPv6.
		t.Run("host server", func(t *testing.T) { testHostServer(ctx, t, c) })
	})
}

// checkNodeIPs checks that each node's Kubernetes addresses are its
// addresses on the cluster's network of the families asked for.
func checkNodeIPs(ctx context.Context, t *testing.T, c *kindtest.Cluster, v4, v6 bool) {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.IPv6() == "" {
			t.Errorf("node %s has no IPv6 address on the cluster's network", n.Name())
		}
		var want []string
		if v4 {
			want = append(want, n.IP())
		}
		if v6 {
			want = append(want, n.IPv6())
		}
		res, err := c.Kubectl(ctx, "get", "node", n.Name(), "-o", `jsonpath={range .status.addresses[?(@.type=="InternalIP")]}{.address} {end}`)
		if got := strings.Fields(res.Stdout); err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("node %s: InternalIPs %q (%v), want %q", n.Name(), got, err, want)
		}
	}
}

// checkPodIPs checks that every echo pod has one address in each of
// ranges, in that order, and returns them by pod name.
func checkPodIPs(ctx context.Context, t *testing.T, c *kindtest.Cluster, ranges ...string) map[string][]string {
	t.Helper()
	res, err := c.Kubectl(ctx, "get", "pods", "-l", "app=echo", "-o", `jsonpath={range .items[*]}{.metadata.name}{range .status.podIPs[*]} {.ip}{end}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 1+len(ranges) {
			t.Errorf("pod addresses %q, want one in each of %q", l, ranges)
			continue
		}
		for i, r := range ranges {
			a, err := netip.ParseAddr(f[1+i])
			if err != nil || !netip.MustParsePrefix(r).Contains(a) {
				t.Errorf("pod %s: address %s is not in %s", f[0], f[1+i], r)
			}
		}
		ips[f[0]] = f[1:]
	}
	return ips
}
