// The pod network: kindtest's own, set up on every node before boot, or
// none (WithoutDefaultCNI) and the wait that fits it.

package kindtest

import (
	"context"
	"errors"

	"github.com/kindtest/kindtest/internal/bootstrap"
)

// registration is what a cluster whose nodes cannot be Ready before the
// test installs a CNI plugin can give: the API server ready and every
// node registered with its pod range (workers join without waiting for
// their kubelet's registration, and a CNI plugin reads the range).
var registration = []readinessCondition{
	{"API server ready", apiServerReady},
	{"nodes registered", nodesRegistered},
}

// waitAPIServer waits for registration, Start's last wait WithoutDefaultCNI.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	if err := c.waitFor(ctx, registration); err != nil {
		return err
	}
	c.log.Printf("kindtest: %s: API server ready, nodes registered; WithoutDefaultCNI: nodes stay NotReady until a CNI plugin is installed (then call WaitReady)", c.name)
	return nil
}

// nodesRegistered is met once every node of the cluster has registered
// and been given its pod range by the controller-manager.
func nodesRegistered(ctx context.Context, c *Cluster, api *apiClient) error {
	return c.everyNode(ctx, api, "not registered with a pod range", func(n node) bool { return n.Spec.PodCIDR != "" })
}

// nodeNetworkCommand prepares node n's networking before it boots (see
// bootstrap.NodeNetworkCommand): DNS, and kindtest's pod network unless
// WithoutDefaultCNI, with routes to the other nodes' pod ranges.
func nodeNetworkCommand(c *Cluster, n *Node) []string {
	if c.cfg.noDefaultCNI {
		return bootstrap.NodeNetworkCommand(bootstrap.NodeNetwork{})
	}
	net := bootstrap.NodeNetwork{
		PodSubnets:        c.cfg.nodePodSubnets(n.index),
		ClusterPodSubnets: prefixStrings(c.cfg.podRanges()),
		BridgeNetfilter:   c.cfg.networkPolicyEnforced(),
	}
	for _, o := range c.nodes {
		if o == n {
			continue
		}
		// Each family's range goes through the other node's address of
		// that family.
		for i, dst := range c.cfg.nodePodSubnets(o.index) {
			net.Routes = append(net.Routes, bootstrap.Route{Dst: dst, Via: o.kubeIPs()[i]})
		}
	}
	return bootstrap.NodeNetworkCommand(net)
}

// attachedWithoutDefaultCNI tells, for Attach, whether the cluster was
// made WithoutDefaultCNI: its control plane has no kindtest pod network.
func (c *Cluster) attachedWithoutDefaultCNI(ctx context.Context) bool {
	_, err := c.ControlPlane().run(ctx, "test", "-f", bootstrap.CNIConfigPath)
	var ee *ExitError
	return errors.As(err, &ee)
}
