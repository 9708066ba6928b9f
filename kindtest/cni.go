package kindtest

import (
	"context"
	"errors"
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

// WaitReady waits until the cluster is ready as Start leaves it: API
// server ready, every node Ready, the default service account present and
// CoreDNS ready, the conditions of Start's ready phase. It is for clusters made WithoutDefaultCNI, after the test
// has installed its CNI plugin, and after node restarts. On failure the
// error says which condition was not met and what the cluster showed.
func (c *Cluster) WaitReady(ctx context.Context) error {
	if !c.cfg.kubernetes {
		return errors.New("wait ready: cluster " + c.name + " was made WithoutKubernetes")
	}
	return c.waitReady(ctx)
}
