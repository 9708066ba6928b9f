// IP families (WithIPFamily): the cluster's ranges in each family, the
// nodes' addresses Kubernetes uses, and the IPv6 range of the nodes'
// network.

package kindtest

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// IPFamily is the IP families a cluster's nodes, pods and Services use.
type IPFamily string

// The IP families WithIPFamily takes, as kind's networking.ipFamily names
// them.
const (
	// IPv4 is the default: nodes, pods and Services have IPv4 addresses.
	IPv4 IPFamily = "ipv4"
	// IPv6 gives nodes, pods and Services IPv6 addresses only (the nodes'
	// containers keep an IPv4 address too, which Kubernetes does not use).
	IPv6 IPFamily = "ipv6"
	// DualStack gives nodes and pods an address of each family, IPv4
	// first; a Service is IPv4 unless its ipFamilies or ipFamilyPolicy
	// ask for IPv6.
	DualStack IPFamily = "dual"
)

// The default IPv6 ranges, kind's: a /64 of pods per node, and a Service
// range as large as a /16 of IPv4 addresses.
const (
	defaultPodSubnet6     = "fd00:10:244::/56"
	defaultServiceSubnet6 = "fd00:10:96::/112"
)

// WithIPFamily sets the cluster's IP families: IPv4 (the default), IPv6
// or DualStack. With IPv6 the nodes' network gets an IPv6 range of its
// own (a random unique local /64), which the engine must be able to give
// (with an engine that cannot, creation fails saying what to change). The
// default IPv6 ranges are fd00:10:244::/56 for pods, a /64 per node, and
// fd00:10:96::/112 for Services, which WithPodSubnet and
// WithServiceSubnet change. In an
// IPv6-only cluster CoreDNS answers for the cluster's names but cannot
// reach the engine's DNS server, which has no IPv6 address, so names
// outside the cluster do not resolve in pods; and WithPortMapping is
// refused, because the engine publishes ports on a node's IPv4 address,
// where no Service listens: use a LoadBalancer Service instead. With
// WithReuse, clusters of different families are told apart.
func WithIPFamily(f IPFamily) Option {
	return func(c *config) error {
		switch f {
		case IPv4:
			c.ipFamily = "" // the default, the same shape
			return nil
		case IPv6, DualStack:
			c.ipFamily = f
			return nil
		}
		return fmt.Errorf("IP family %q: use %q, %q or %q", f, IPv4, IPv6, DualStack)
	}
}

// family is the cluster's IP family, IPv4 when none was set.
func (s shape) family() IPFamily {
	if s.ipFamily == "" {
		return IPv4
	}
	return s.ipFamily
}

// hasIPv4 and hasIPv6 say whether Kubernetes uses that family.
func (s shape) hasIPv4() bool { return s.family() != IPv6 }
func (s shape) hasIPv6() bool { return s.family() != IPv4 }

// podRanges are the cluster's pod ranges, one per family, IPv4 first.
func (s shape) podRanges() []netip.Prefix {
	return s.ranges(s.pods, defaultPodSubnet, defaultPodSubnet6)
}

// serviceRanges are the cluster's Service ranges, one per family, IPv4
// first.
func (s shape) serviceRanges() []netip.Prefix {
	return s.ranges(s.services, defaultServiceSubnet, defaultServiceSubnet6)
}

// podSubnet is the cluster's pod ranges as kubeadm and kube-proxy take
// them: comma-separated, IPv4 first.
func (s shape) podSubnet() string { return joinPrefixes(s.podRanges()) }

// serviceSubnet is the cluster's Service ranges, comma-separated.
func (s shape) serviceSubnet() string { return joinPrefixes(s.serviceRanges()) }

// ranges is, for each of the cluster's families, the range of that family
// among given (a WithPodSubnet or WithServiceSubnet value), or its
// default.
func (s shape) ranges(given, def4, def6 string) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range []struct {
		on  bool
		is4 bool
		def string
	}{{s.hasIPv4(), true, def4}, {s.hasIPv6(), false, def6}} {
		if !f.on {
			continue
		}
		p := netip.MustParsePrefix(f.def)
		for _, g := range splitPrefixes(given) {
			if g.Addr().Is4() == f.is4 {
				p = g
			}
		}
		out = append(out, p)
	}
	return out
}

// nodePodSubnets are node i's pod ranges, one per family: the i-th /24 of
// the IPv4 pod range, the i-th /64 of the IPv6 one. Each node owns fixed
// ranges, so the pod network is known before any node boots and needs no
// controller.
func (s shape) nodePodSubnets(i int) []string {
	var out []string
	for _, p := range s.podRanges() {
		out = append(out, nthSubnet(p, i).String())
	}
	return out
}

// nthSubnet is the i-th /24 of an IPv4 range, or the i-th /64 of an IPv6
// one.
func nthSubnet(p netip.Prefix, i int) netip.Prefix {
	if p.Addr().Is4() {
		a := p.Addr().As4()
		n := binary.BigEndian.Uint32(a[:]) + uint32(i)<<8
		binary.BigEndian.PutUint32(a[:], n)
		return netip.PrefixFrom(netip.AddrFrom4(a), 24).Masked()
	}
	a := p.Addr().As16()
	binary.BigEndian.PutUint64(a[:8], binary.BigEndian.Uint64(a[:8])+uint64(i))
	return netip.PrefixFrom(netip.AddrFrom16(a), 64).Masked()
}

// perNodeBits is the prefix length of a node's pod range in a family.
func perNodeBits(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 24
	}
	return 64
}

// splitPrefixes reads a comma-separated list of ranges a subnet option
// stored (see subnetOption); "" is none.
func splitPrefixes(s string) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			out = append(out, netip.MustParsePrefix(f))
		}
	}
	return out
}

// joinPrefixes writes ranges comma-separated.
func joinPrefixes(ps []netip.Prefix) string { return strings.Join(prefixStrings(ps), ",") }

// prefixStrings is ps written out.
func prefixStrings(ps []netip.Prefix) []string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return s
}

// familyName is how errors name an address's family.
func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// nodeNetwork6 is a new IPv6 range for a cluster's nodes' network: a /64
// of a random unique local prefix (RFC 4193), so that the networks of
// clusters side by side on one engine do not overlap, and one that
// overlaps none of avoid (the cluster's pod and Service ranges).
func nodeNetwork6(avoid ...netip.Prefix) netip.Prefix {
	for {
		var a [16]byte
		a[0] = 0xfd
		if _, err := rand.Read(a[1:6]); err != nil {
			panic(fmt.Sprintf("kindtest: random IPv6 prefix: %v", err)) // crypto/rand does not fail on supported systems
		}
		p := netip.PrefixFrom(netip.AddrFrom16(a), 64)
		// The options allow IPv6 ranges of /32 at most, so a draw
		// overlaps one with a chance of 2^-24 or less.
		if !slices.ContainsFunc(avoid, p.Overlaps) {
			return p
		}
	}
}

// kubeIPs are node n's addresses that Kubernetes uses, in the cluster's
// families, IPv4 first: its kubelet's node IPs.
func (n *Node) kubeIPs() []string {
	fam := IPv4
	if n.cluster != nil {
		fam = n.cluster.cfg.family()
	}
	switch fam {
	case IPv6:
		return []string{n.ip6}
	case DualStack:
		return []string{n.ip, n.ip6}
	}
	return []string{n.ip}
}

// kubeIP is node n's address in the cluster's first family: where its
// API server advertises itself and its node ports are dialled.
func (n *Node) kubeIP() string { return n.kubeIPs()[0] }

// ipv6EngineHint is what to change when the engine cannot give the
// nodes' network IPv6.
const ipv6EngineHint = "the engine's host must have IPv6 enabled (on Linux: a kernel booted without ipv6.disable=1 on its command line, and sysctl net.ipv6.conf.all.disable_ipv6=0 and net.ipv6.conf.default.disable_ipv6=0); on Docker Desktop, turn on IPv6 in Settings > Resources > Network; with podman, its network backend must be netavark"
