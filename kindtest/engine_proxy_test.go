package kindtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// TestProxyEnvironment: the test process's HTTP_PROXY and NO_PROXY reach
// the nodes' containerd and kubelet. A proxy that answers nothing makes a
// pull from an outside registry fail through it (so containerd uses it),
// while the cluster itself, which NO_PROXY covers (node addresses, the
// API server, the cluster's registry by name), works as without one: the
// cluster becomes Ready and a pod pulls its image from the registry.
func TestProxyEnvironment(t *testing.T) {
	dc := engine(t)
	ctx := t.Context()
	// 192.0.2.0/24 is TEST-NET-1: nothing answers there.
	const proxy = "http://192.0.2.1:3128"
	t.Setenv("HTTP_PROXY", proxy)
	t.Setenv("HTTPS_PROXY", proxy)
	t.Setenv("NO_PROXY", "internal.example.com")
	c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithRegistry())
	for _, n := range c.Nodes() {
		for _, unit := range []string{"containerd", "kubelet"} {
			res, err := n.Exec(ctx, "sh", "-c", `tr '\0' '\n' < /proc/"$(pidof "$1")"/environ`, "environ", unit)
			if err != nil {
				t.Fatal(err)
			}
			env := res.Stdout
			for _, want := range []string{"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "internal.example.com", ".svc", "10.96.0.0/16", c.ControlPlane().Name()} {
				if !strings.Contains(env, want) {
					t.Errorf("%s on %s: environment %q lacks %q", unit, n.Name(), env, want)
				}
			}
			// The node network's subnet, which the node's address is in.
			ip := n.IP()
			prefix := ip[:strings.LastIndex(ip, ".")]
			if !strings.Contains(env, ","+prefix[:strings.Index(prefix, ".")]) {
				t.Errorf("%s on %s: NO_PROXY %q lacks the node network's subnet (node at %s)", unit, n.Name(), env, ip)
			}
		}
	}
	// Through the proxy, which answers nothing: the kubelet's pull, by
	// containerd, fails at the proxy.
	if err := c.Apply(ctx, alwaysPulledPod("outside", "registry.example.com/nothing:1", c.ControlPlane().Name())); err != nil {
		t.Fatal(err)
	}
	var last string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		res, err := c.Kubectl(ctx, "get", "events", "--field-selector", "involvedObject.name=outside", "-o", "jsonpath={.items[*].message}")
		if err == nil {
			last = res.Stdout
		}
		if strings.Contains(last, "proxyconnect") {
			break
		}
	}
	if !strings.Contains(last, "proxyconnect") || !strings.Contains(last, "192.0.2.1:3128") {
		t.Errorf("pull from an outside registry: events %q, want it to fail through the proxy (proxyconnect ... 192.0.2.1:3128)", last)
	}
	// Past it: the cluster's registry.
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pushed := c.RegistryAddr() + "/echo:proxy"
	if err := dc.TagImage(ctx, echo, pushed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.RemoveImage(context.Background(), pushed) })
	if err := dc.PushImage(ctx, pushed, nil); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes() {
		pod := "pulled-" + string(rune('a'+i))
		if err := c.Apply(ctx, alwaysPulledPod(pod, pushed, n.Name())); err != nil {
			t.Fatal(err)
		}
		waitPodReady(ctx, t, c, pod)
	}
}

func TestProxyRefusedBeforeCreate(t *testing.T) {
	engine(t)
	t.Setenv("HTTPS_PROXY", "proxy.example.com 3128")
	before := clusterNames(t)
	_, err := kindtest.New(context.Background())
	if err == nil || !strings.Contains(err.Error(), `HTTPS_PROXY="proxy.example.com 3128" is not a proxy URL`) {
		t.Errorf("New with a bad HTTPS_PROXY: %v, want it refused naming the variable", err)
	}
	if after := clusterNames(t); len(after) > len(before) {
		t.Errorf("clusters before %v, after %v", before, after)
	}
}
