package kindtest

import (
	"github.com/kindtest/kindtest/internal/docker"
)

// Node is one node container of a cluster.
type Node struct {
	name    string
	id      string
	role    string
	index   int
	ip      string
	gateway string
	docker  *docker.Client
}

// Name is the node's container name, host name and Kubernetes node name.
func (n *Node) Name() string { return n.name }

// ID is the node's container ID.
func (n *Node) ID() string { return n.id }

// Role is RoleControlPlane or RoleWorker.
func (n *Node) Role() string { return n.role }

// IP is the node's address on the cluster's Docker network.
func (n *Node) IP() string { return n.ip }
