//go:build enginematrix

package enginetest_test

import (
	"testing"

	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/kindtest"
)

// networkingTests are the engine tests of the networking options: IP
// families, kube-proxy modes, pod and Service ranges, LoadBalancer
// Services.
var networkingTests = []string{"TestIPFamilies", "TestKubeProxyModes", "TestSubnets", "TestLoadBalancerServices"}

// TestNetworkingEngines runs networkingTests (the dual-stack and
// IPv6-only clusters among them) on Docker 29 and podman 5, with IPv6 on
// in their network namespaces as on a host with IPv6.
//
// An engine on a host without IPv6 is not among them: turning IPv6 off in
// the engine's namespace (disable_ipv6=1) is no such host, since Docker 29
// turns it back on for its bridges and gave the nodes IPv6 addresses
// there; only a kernel booted with ipv6.disable=1 is.
func TestNetworkingEngines(t *testing.T) {
	host := enginetest.Client(t)
	node := nodeImage(t, host)
	images := []string{node, kindtest.ReaperImage, kindtest.LoadBalancerImage}
	bin := enginetest.BuildTests(t, "./kindtest")
	for _, r := range []enginetest.Release{enginetest.Docker29, enginetest.Podman5} {
		t.Run(string(r), func(t *testing.T) {
			e := enginetest.StartEngine(t, host, enginetest.EngineConfig{Release: r, ContainerdStore: r == enginetest.Docker29, IPv6: true, Images: images})
			enginetest.RunTests(t, e.NetNS(), bin, []string{"DOCKER_HOST=" + e.Host, "KINDTEST_IMAGE=" + node, "CI=true"}, networkingTests)
		})
	}
}
