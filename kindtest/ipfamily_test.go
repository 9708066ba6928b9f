package kindtest

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestIPFamilyRanges checks each family's ranges: the defaults, a range
// given for one family keeping the other's default, and each node's
// ranges.
func TestIPFamilyRanges(t *testing.T) {
	for _, tc := range []struct {
		opts              []Option
		pods, services    string
		node2             []string
		family            IPFamily
		shapePods, shape6 string
	}{
		{nil, "10.244.0.0/16", "10.96.0.0/16", []string{"10.244.2.0/24"}, IPv4, "", ""},
		{[]Option{WithIPFamily(IPv6)}, "fd00:10:244::/56", "fd00:10:96::/112", []string{"fd00:10:244:2::/64"}, IPv6, "", ""},
		{[]Option{WithIPFamily(DualStack)}, "10.244.0.0/16,fd00:10:244::/56", "10.96.0.0/16,fd00:10:96::/112", []string{"10.244.2.0/24", "fd00:10:244:2::/64"}, DualStack, "", ""},
		// One family given: the other keeps its default; the order given
		// does not matter.
		{[]Option{WithIPFamily(DualStack), WithPodSubnet("fd00:aa::/48")}, "10.244.0.0/16,fd00:aa::/48", "10.96.0.0/16,fd00:10:96::/112", []string{"10.244.2.0/24", "fd00:aa:0:2::/64"}, DualStack, "fd00:aa::/48", ""},
		{[]Option{WithIPFamily(DualStack), WithPodSubnet("fd00:aa::/48, 10.30.0.0/16"), WithServiceSubnet("fd00:bb::/108")}, "10.30.0.0/16,fd00:aa::/48", "10.96.0.0/16,fd00:bb::/108", []string{"10.30.2.0/24", "fd00:aa:0:2::/64"}, DualStack, "10.30.0.0/16,fd00:aa::/48", "fd00:bb::/108"},
		// A default spelled out is the default shape.
		{[]Option{WithIPFamily(IPv4), WithPodSubnet("10.244.0.0/16")}, "10.244.0.0/16", "10.96.0.0/16", []string{"10.244.2.0/24"}, IPv4, "", ""},
		{[]Option{WithIPFamily(IPv6), WithPodSubnet("fd00:10:244::/56"), WithServiceSubnet("fd00:10:96::/112")}, "fd00:10:244::/56", "fd00:10:96::/112", []string{"fd00:10:244:2::/64"}, IPv6, "", ""},
	} {
		cfg, err := newConfig(append([]Option{WithWorkers(2)}, tc.opts...))
		if err != nil {
			t.Errorf("%v: %v", tc.pods, err)
			continue
		}
		if got := cfg.podSubnet(); got != tc.pods {
			t.Errorf("pod subnet %s, want %s", got, tc.pods)
		}
		if got := cfg.serviceSubnet(); got != tc.services {
			t.Errorf("Service subnet %s, want %s", got, tc.services)
		}
		if got := cfg.nodePodSubnets(2); !slices.Equal(got, tc.node2) {
			t.Errorf("%s: node 2's ranges %q, want %q", tc.pods, got, tc.node2)
		}
		if cfg.family() != tc.family || cfg.pods != tc.shapePods || cfg.services != tc.shape6 {
			t.Errorf("%s: shape family %q pods %q services %q, want %q %q %q", tc.pods, cfg.family(), cfg.pods, cfg.services, tc.family, tc.shapePods, tc.shape6)
		}
	}
	if got := nthSubnet(netip.MustParsePrefix("fd00:1:2:ff::/56"), 1); got.String() != "fd00:1:2:100::/64" {
		t.Errorf("node 1 of fd00:1:2:ff::/56... carries into the next /56: %s", got)
	}
}

// TestIPFamilyErrors checks what WithIPFamily and the ranges refuse.
func TestIPFamilyErrors(t *testing.T) {
	wantErr(t, optionErr(t, WithIPFamily("IPv6")), `IP family "IPv6": use "ipv4", "ipv6" or "dual"`)
	wantErr(t, optionErr(t, WithPodSubnet("fd00:100::/56")), "pod subnet fd00:100::/56: an IPv6 range, but the cluster's IP family is ipv4: use WithIPFamily(DualStack)")
	wantErr(t, optionErr(t, WithIPFamily(IPv6), WithServiceSubnet("10.1.0.0/16")), "Service subnet 10.1.0.0/16: an IPv4 range, but the cluster's IP family is ipv6")
	wantErr(t, optionErr(t, WithIPFamily(DualStack), WithPodSubnet("10.1.0.0/16,10.2.0.0/16")), `pod subnet "10.1.0.0/16,10.2.0.0/16": two IPv4 ranges; give at most one of each family`)
	wantErr(t, optionErr(t, WithIPFamily(DualStack), WithPodSubnet("fd00:1::/64")), `pod subnet "fd00:1::/64": a /64; use an IPv6 range of a /32 to a /63`)
	wantErr(t, optionErr(t, WithIPFamily(DualStack), WithPodSubnet("fd00:1::/62"), WithWorkers(4)), "pod subnet fd00:1::/62: holds 4 /64s, one per node, for 5 nodes")
	wantErr(t, optionErr(t, WithIPFamily(IPv6), WithPodSubnet("fd00:1::/48"), WithServiceSubnet("fd00:1::/112")), "pod subnet fd00:1::/48 and Service subnet fd00:1::/112 overlap")
	wantErr(t, optionErr(t, WithIPFamily(IPv6), WithPortMapping(0, 30080)), "WithPortMapping with WithIPFamily(IPv6): the engine publishes ports on the node's IPv4 address")
	wantErr(t, optionErr(t, WithoutKubernetes(), WithIPFamily(DualStack)), "IP family dual: the families are Kubernetes'")
	wantErr(t, optionErr(t, WithIPFamily(DualStack), WithServiceSubnet("fe80::/112")), `Service subnet "fe80::/112": not a unicast range`)
	if _, err := newConfig([]Option{WithIPFamily(DualStack), WithPortMapping(0, 30080)}); err != nil {
		t.Errorf("a dual-stack cluster publishes node ports on the IPv4 address: %v", err)
	}

	// From a kind configuration.
	kind := func(family string) Option {
		return WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  ipFamily: " + family + "\n  podSubnet: 10.20.0.0/16,fd00:20::/56\n"))
	}
	if cfg, err := newConfig([]Option{kind("dual")}); err != nil || cfg.family() != DualStack || cfg.podSubnet() != "10.20.0.0/16,fd00:20::/56" {
		t.Errorf("kind ipFamily dual: %v", err)
	}
	wantErr(t, optionErr(t, kind("ipv5")), `field networking.ipFamily: IP family "ipv5": use`)
	wantErr(t, optionErr(t, kind("ipv4")), "pod subnet fd00:20::/56: an IPv6 range, but the cluster's IP family is ipv4")
}

// TestIPFamilyNodeConfig checks what a dual-stack and an IPv6 cluster
// tell kubeadm, the kubelet and the pod network.
func TestIPFamilyNodeConfig(t *testing.T) {
	for _, tc := range []struct {
		family              IPFamily
		advertise, nodeIP   string
		pods, services, dst string
		routes              []string
	}{
		{DualStack, "172.18.0.2", "172.18.0.2,fd11::2", "10.244.0.0/16,fd00:10:244::/56", "10.96.0.0/16,fd00:10:96::/112", "0.0.0.0/0", []string{"route", "10.244.0.0/24", "172.18.0.2", "route", "fd00:10:244::/64", "fd11::2"}},
		{IPv6, "fd11::2", "fd11::2", "fd00:10:244::/56", "fd00:10:96::/112", "::/0", []string{"route", "fd00:10:244::/64", "fd11::2"}},
	} {
		cfg, err := newConfig([]Option{WithIPFamily(tc.family), WithWorkers(1)})
		if err != nil {
			t.Fatal(err)
		}
		c := &Cluster{cfg: cfg, identity: identity{name: "c"}}
		cp := &Node{name: "c-control-plane", ip: "172.18.0.2", ip6: "fd11::2", cluster: c, role: RoleControlPlane}
		w := &Node{name: "c-worker", ip: "172.18.0.3", ip6: "fd11::3", index: 1, cluster: c, role: RoleWorker}
		c.nodes = []*Node{cp, w}
		if c.apiHost() != tc.advertise {
			t.Errorf("%s: pods reach the API server at %s, want %s", tc.family, c.apiHost(), tc.advertise)
		}
		init := kubeadmInitConfig(c.initParams(&creation{}, cp))
		for _, want := range []string{
			"advertiseAddress: " + tc.advertise + "\n",
			"podSubnet: " + tc.pods + "\n",
			"serviceSubnet: " + tc.services + "\n",
			"clusterCIDR: " + tc.pods + "\n",
			"  - fd11::2\n", // a certificate name
			"controlPlaneEndpoint: 172.18.0.2:6443\n",
			"- name: node-ip\n    value: \"" + tc.nodeIP + "\"",
		} {
			if !strings.Contains(init, want) {
				t.Errorf("%s: the init configuration lacks %q:\n%s", tc.family, want, init)
			}
		}
		if join := kubeadmJoinConfig(w, KubernetesVersion, "t", 0, &cfg.settings); !strings.Contains(join, "- name: node-ip\n    value: \""+strings.Join(w.kubeIPs(), ",")+"\"") || strings.Contains(join, "172.18.0.3,") != (tc.family == DualStack) {
			t.Errorf("%s: the worker's join configuration has the wrong node-ip:\n%s", tc.family, join)
		}
		args := nodeNetworkCommand(c, w)[4:]
		if !strings.Contains(args[0], `"dst": "`+tc.dst+`"`) || !strings.Contains(args[0], "fd00:10:244:1::/64") {
			t.Errorf("%s: the worker's CNI configuration:\n%s", tc.family, args[0])
		}
		if got := args[len(args)-len(tc.routes):]; !slices.Equal(got, tc.routes) {
			t.Errorf("%s: the worker's routes %q, want %q", tc.family, got, tc.routes)
		}
	}
}

// TestNodeNetwork6 checks the random IPv6 ranges of the nodes' networks.
func TestNodeNetwork6(t *testing.T) {
	a, b := nodeNetwork6(), nodeNetwork6()
	if a == b {
		t.Errorf("two networks got the same IPv6 range %s", a)
	}
	for _, p := range []netip.Prefix{a, b} {
		if p.Bits() != 64 || !p.Addr().IsPrivate() || p.Addr().As16()[0] != 0xfd || p.Masked() != p {
			t.Errorf("%s: not a unique local /64", p)
		}
	}
	// With half of the unique local space to avoid, every draw lands in
	// the other half.
	avoid := []netip.Prefix{netip.MustParsePrefix("fd00::/9"), netip.MustParsePrefix("fd00:10:96::/112")}
	for range 200 {
		if p := nodeNetwork6(avoid...); p.Addr().As16()[1] < 0x80 {
			t.Fatalf("%s overlaps %s", p, avoid[0])
		}
	}
}
