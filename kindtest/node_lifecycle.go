package kindtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/poll"
)

// haltSignal makes systemd, the node's PID 1, shut the node down cleanly.
const haltSignal = "SIGRTMIN+3"

// nodeStopGrace is how long Stop lets systemd shut the node down before
// the engine kills it: `docker stop`'s default, as kind has it. systemd
// gives each unit 90 s to stop, and a pod's container that ignores
// SIGTERM takes all of them: a test should not wait for that.
const nodeStopGrace = 10 * time.Second

// Stop shuts the node down (systemd halts, its containers and the kubelet
// with it; what has not stopped after 10 s is killed, as by `docker
// stop`) and leaves its container stopped, its /var volume and its file
// system in place. Kubernetes marks the node NotReady once its
// lease runs out (40 s). Stopping a stopped node does nothing.
func (n *Node) Stop(ctx context.Context) error {
	info, err := n.docker.InspectContainer(ctx, n.id)
	if err != nil {
		return &NodeError{Node: n.name, Step: "stop", Err: err}
	}
	if !info.Running {
		return nil
	}
	if err := n.docker.KillContainer(ctx, n.id, haltSignal); err != nil {
		return &NodeError{Node: n.name, Step: "stop", Err: err}
	}
	wctx, cancel := context.WithTimeout(ctx, nodeStopGrace)
	defer cancel()
	_ = poll.Until(wctx, 50*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
		info, err := n.docker.InspectContainer(wctx, n.id)
		return err == nil && !info.Running, nil
	})
	if err := ctx.Err(); err != nil {
		return &NodeError{Node: n.name, Step: "stop", Err: err}
	}
	// A node that did not halt in time (or never booted: its entrypoint
	// ignores the halt signal) is stopped by the engine.
	if err := n.docker.StopContainer(ctx, n.id, time.Second); err != nil {
		return &NodeError{Node: n.name, Step: "stop", Err: err}
	}
	return nil
}

// Start boots a stopped node again as creation did: the container starts
// (its entrypoint waits), is provisioned again (read-only /sys, cgroup
// binds, shared mounts; its machine id kept), its network set up again
// (DNS, kindtest's pod network routes unless WithoutDefaultCNI), then
// systemd boots. Start returns once the node is Ready again, with a fresh
// status from its kubelet; for the control plane, once the API server
// answers again (its published port may have changed: APIServer,
// Kubeconfig and KubeconfigPath follow; do not start the control plane
// while other goroutines use the cluster's API). Starting a running node
// does nothing. A node whose address on the cluster's network changed
// while it was stopped (another container took it) is an error: the
// cluster knows nodes by address.
func (n *Node) Start(ctx context.Context) error {
	c := n.cluster
	if c == nil {
		return &NodeError{Node: n.name, Step: "start", Err: errors.New("the node has no cluster handle")}
	}
	info, err := n.docker.InspectContainer(ctx, n.id)
	if err != nil {
		return &NodeError{Node: n.name, Step: "start", Err: err}
	}
	if info.Running {
		return nil
	}
	started := time.Now()
	if err := n.docker.StartContainer(ctx, n.id); err != nil {
		return &NodeError{Node: n.name, Step: "start container", Err: err}
	}
	if info, err = n.docker.InspectContainer(ctx, n.id); err != nil {
		return c.nodeError(n, "inspect container", err)
	}
	// The engine gives a restarted container its old address unless
	// another container took it meanwhile. Every node's kubelet, the
	// control plane's certificates and etcd, and the other nodes' routes
	// know the old one.
	if ip := info.IPs[c.name]; ip != n.ip || info.IPv6s[c.name] != n.ip6 {
		if ip == n.ip {
			ip = info.IPv6s[c.name]
		}
		// Left stopped, as it was: its entrypoint would wait for a boot
		// signal that never comes.
		_ = n.docker.StopContainer(ctx, n.id, time.Second)
		return &NodeError{Node: n.name, Step: "start", Err: fmt.Errorf("the node's address on network %s changed from %s to %s while it was stopped (another container took it): the cluster knows the old one; recreate the cluster", c.name, n.ip, ip)}
	}
	if err := c.reprovision(ctx, n); err != nil {
		return err
	}
	if err := c.bootNode(ctx, n); err != nil {
		return err
	}
	if !c.cfg.kubernetes {
		return nil
	}
	if n.index == 0 && !c.ha() {
		c.apiServer = c.place.apiServerURL(c.name, info)
		if err := c.fetchKubeconfig(ctx, nil); err != nil {
			return &NodeError{Node: n.name, Step: "fetch kubeconfig", Err: err}
		}
	}
	if err := c.waitNodeReady(ctx, n, started); err != nil {
		return err
	}
	c.log.Printf("kindtest: %s: node %s started and Ready in %v", c.name, n.name, time.Since(started).Round(time.Millisecond))
	return nil
}

// Restart stops the node and starts it again: see Stop and Start.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Stop(ctx); err != nil {
		return err
	}
	return n.Start(ctx)
}

// reprovision redoes, on a restarted node container, what creation did
// before boot that did not survive the restart: mounts and the network
// namespace's rules, routes and DNS. The container's file system (CNI
// configuration, machine id, kubeadm's files) and its /var volume did.
func (c *Cluster) reprovision(ctx context.Context, n *Node) error {
	id, err := n.run(ctx, "cat", "/etc/machine-id")
	if err != nil {
		return c.nodeError(n, "read machine id", err)
	}
	steps := [][]string{bootstrap.ProvisionCommand(strings.TrimSpace(id))}
	if c.cfg.kubernetes {
		steps = append(steps, nodeNetworkCommand(c, n))
	}
	if _, err := n.run(ctx, bootstrap.Chain(steps...)...); err != nil {
		return c.nodeError(n, "provision before boot", err)
	}
	return nil
}

// nodeStatus is the part of a Node object that waitNodeReady reads.
type nodeStatus struct {
	Status struct {
		Conditions []struct {
			Type              string    `json:"type"`
			Status            string    `json:"status"`
			Reason            string    `json:"reason"`
			LastHeartbeatTime time.Time `json:"lastHeartbeatTime"`
		} `json:"conditions"`
	} `json:"status"`
}

// waitNodeReady waits until the API server answers and node n's kubelet
// has reported it Ready since since: a Ready condition left from before
// a restart does not count.
func (c *Cluster) waitNodeReady(ctx context.Context, n *Node, since time.Time) error {
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.name, err)
	}
	defer api.close()
	// The API server's times have a resolution of a second.
	since = since.Truncate(time.Second)
	last := "API server not answering"
	err = poll.Until(ctx, 100*time.Millisecond, time.Second, func() (bool, error) {
		if err := apiServerReady(ctx, c, api); err != nil {
			last = "API server not ready: " + err.Error()
			return false, nil
		}
		var node nodeStatus
		if err := api.get(ctx, "/api/v1/nodes/"+n.name, &node); err != nil {
			last = err.Error()
			return false, nil
		}
		last = "no Ready condition"
		for _, cond := range node.Status.Conditions {
			if cond.Type != "Ready" {
				continue
			}
			last = fmt.Sprintf("Ready=%s (%s), last reported %s", cond.Status, cond.Reason, cond.LastHeartbeatTime.Format(time.RFC3339))
			if cond.Status == "True" && !cond.LastHeartbeatTime.Before(since) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return &NodeError{Node: n.name, Step: "wait for node Ready after start", Err: fmt.Errorf("%w (last seen: %s)", err, last), Diagnostics: c.kubeletDiagnostics(n)}
	}
	return nil
}
