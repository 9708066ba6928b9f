package kindtest

import (
	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/imageref"
)

// NetworkPolicy is enforced on every cluster whose pod network is
// kindtest's own: kube-network-policies (sigs.k8s.io), a DaemonSet in
// kube-system on the host network of each node, filters pod traffic in an
// nftables table of its own (table inet kube-network-policies), sending
// the first packet of each connection that a policy selects to user space
// through an nfqueue. Cross-node traffic is routed through the nodes; the
// agent sees it on its way out of each node (the postrouting hook), which
// covers egress rules on the client's node and ingress rules on the
// server's. Same-node traffic crosses the node's bridge, which the
// netfilter hooks see because bridge-nf-call-iptables is on.
//
// Start does not wait for the agent: once the cluster is ready, it starts
// the apply of the agent's manifest with the storage add-on and returns.
// Until the agent runs on a node (a few seconds), that node enforces no
// policy: a test that asserts a policy blocks traffic waits for the
// DaemonSet NetworkPolicyDaemonSet in kube-system to be ready first.
const (
	// NetworkPolicyDaemonSet is the name of the DaemonSet, in kube-system,
	// that enforces NetworkPolicy unless WithoutNetworkPolicy or
	// WithoutDefaultCNI is given.
	NetworkPolicyDaemonSet = "kube-network-policies"
)

// Where the control plane keeps the agent's manifest (applied with the
// storage manifest, by the same detached apply).
const networkPolicyManifestPath = "/etc/kindtest/network-policy.yaml"

// networkPolicyManifest returns the agent's ServiceAccount, RBAC and
// DaemonSet. Like CoreDNS and the storage provisioner, the agent reaches
// the API server at apiHost:apiPort rather than through the kubernetes
// Service, which kube-proxy may not have programmed yet when it starts.
// NRI is off: the node's containerd does not serve it, and the agent
// learns pod addresses from the API server instead. Its metrics listen on
// the node's loopback only, so that they take no port from the tests.
func networkPolicyManifest(apiHost string, apiPort int) string {
	return bootstrap.NetworkPolicyAddon{
		Image: imageref.NetworkPolicies, Name: NetworkPolicyDaemonSet, APIHost: apiHost, APIPort: apiPort,
	}.Manifest()
}
