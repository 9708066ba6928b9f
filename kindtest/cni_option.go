package kindtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// WithoutDefaultCNI leaves the pod network to the test: kindtest writes no
// CNI configuration, adds no routes between nodes' pod ranges and no
// masquerading, so nodes come up NotReady and CoreDNS stays Pending until
// the test installs a CNI plugin (Calico, Cilium, a bridge configuration
// of its own...). The controller-manager then allocates each node's pod
// range (node.spec.podCIDR) from 10.244.0.0/16, as CNI plugins expect.
// Start and New return once the API server answers and every node is
// registered with its pod range, and say so; call
// (*Cluster).WaitReady after applying the CNI. The node image carries the
// standard CNI plugins in /usr/lib/cni. kindtest's NetworkPolicy agent
// (see WithoutNetworkPolicy) is not installed either: the CNI plugin brings
// its own enforcement, or none. Default: kindtest's own pod network, a
// bridge per node, ready before the nodes boot, with NetworkPolicy
// enforced.
func WithoutDefaultCNI() Option {
	return func(c *config) error { c.noDefaultCNI = true; return nil }
}

// validateNetworking checks the options of this file and
// registry_option.go against each other and the rest.
func (c *config) validateNetworking() []error {
	errs := c.validateRegistry()
	if c.noDefaultCNI && !c.kubernetes {
		errs = append(errs, errors.New("WithoutDefaultCNI replaces Kubernetes' pod network, which WithoutKubernetes leaves out altogether: drop one of them"))
	}
	return errs
}

// networkingReuseKey is what the options of this file and
// registry_option.go add to a reusable cluster's configuration hash: ""
// when none is given, so that the hash of other clusters stays as it was.
func networkingReuseKey(c *config) string {
	var b strings.Builder
	if c.registry {
		b.WriteString("|registry")
	}
	for _, m := range c.mirrors {
		fmt.Fprintf(&b, "|mirror=%s=%s", m.host, m.endpoint)
	}
	if c.noDefaultCNI {
		b.WriteString("|no-default-cni")
	}
	return b.String()
}

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
