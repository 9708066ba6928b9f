package kindtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/docker"
)

// Node is one node container of a cluster.
type Node struct {
	name  string
	id    string
	role  string
	index int
	ip    string
	// ip6 is its IPv6 address on the cluster's network, if that has one.
	ip6    string
	docker *docker.Client
	// cgroupV2 says the engine runs the node on a cgroup v2 host.
	cgroupV2 bool
	// oomScoreAdj, if not nil, is the OOM score the node's kubelet keeps:
	// the node cannot lower it (see bootstrap.KubeletOOMScoreAdj).
	oomScoreAdj *int
	// cluster is the cluster the node belongs to, for Stop and Start.
	cluster *Cluster
}

// Name is the node's container name, host name and Kubernetes node name.
func (n *Node) Name() string { return n.name }

// ID is the node's container ID.
func (n *Node) ID() string { return n.id }

// Role is RoleControlPlane or RoleWorker.
func (n *Node) Role() string { return n.role }

// IP is the node's IPv4 address on the cluster's Docker network. Other
// containers on that network reach it, and so does the engine's host on
// Linux; Docker Desktop and colima (macOS, Windows) do not route to it
// from the host: reach a node from a test there with MappedAddr or
// PortForward, which go through published ports and the engine's API.
func (n *Node) IP() string { return n.ip }

// IPv6 is the node's IPv6 address on the cluster's Docker network, the
// one Kubernetes uses in an IPv6 or dual-stack cluster (WithIPFamily);
// "" in an IPv4 cluster, whose network has no IPv6 range.
func (n *Node) IPv6() string { return n.ip6 }

// MemoryUsage returns the memory the node's processes use, read from the
// node's own cgroup: usage less inactive page cache, which the kernel can
// take back at once (what `docker stats` reports).
func (n *Node) MemoryUsage(ctx context.Context) (uint64, error) {
	out, err := n.run(ctx, bootstrap.MemoryCommand()...)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, fmt.Errorf("node %s: memory usage: unexpected %q", n.name, out)
	}
	usage, err1 := strconv.ParseUint(f[0], 10, 64)
	inactive, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || inactive > usage {
		return 0, fmt.Errorf("node %s: memory usage: unexpected %q", n.name, out)
	}
	return usage - inactive, nil
}
