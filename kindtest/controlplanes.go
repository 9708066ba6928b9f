package kindtest

import (
	"context"
	"strings"
)

// ha says the cluster has several control planes behind a load balancer.
func (c *Cluster) ha() bool { return c.cfg.controlPlanes > 1 }

// ControlPlanes returns the control-plane nodes, the first (ControlPlane)
// first.
func (c *Cluster) ControlPlanes() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.role == RoleControlPlane {
			out = append(out, n)
		}
	}
	return out
}

// newNodes makes the cluster's nodes, by index: the first control plane,
// the workers, then the other control planes.
func (c *Cluster) newNodes() {
	w, n := c.cfg.workers, c.cfg.workers+c.cfg.controlPlanes
	c.nodes = make([]*Node, n)
	for i := range n {
		role, name := RoleWorker, nodeName(c.name, i)
		switch {
		case i == 0:
			role = RoleControlPlane
		case i > w:
			role, name = RoleControlPlane, controlPlaneName(c.name, i-w)
		}
		c.nodes[i] = &Node{name: name, role: role, index: i, docker: c.docker, cluster: c}
	}
}

// sharedCertFiles are the files under /etc/kubernetes/pki that every
// control plane must share: the cluster CAs and the service-account key.
// kubeadm join --control-plane makes the rest from them.
var sharedCertFiles = []string{
	"ca.crt", "ca.key", "sa.key", "sa.pub",
	"front-proxy-ca.crt", "front-proxy-ca.key",
	"etcd/ca.crt", "etcd/ca.key",
}

// joinControlPlane copies the shared certificates from the first control
// plane to n and joins it as a control plane (and etcd member).
func (c *Cluster) joinControlPlane(ctx context.Context, cr *creation, n *Node) error {
	first := c.ControlPlane()
	res, err := first.Exec(ctx, append([]string{"tar", "-C", "/etc/kubernetes/pki", "-c"}, sharedCertFiles...)...)
	if err != nil {
		return c.nodeError(first, "read shared certificates", err)
	}
	if _, err := n.ExecInput(ctx, strings.NewReader(res.Stdout), "sh", "-c", "mkdir -p /etc/kubernetes/pki && tar -C /etc/kubernetes/pki -x"); err != nil {
		return c.nodeError(n, "write shared certificates", err)
	}
	return c.kubeadmJoin(ctx, cr, n)
}
