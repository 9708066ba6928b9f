// The fixed layout of every cluster: its address ranges, the API
// server's port, the container runtime's socket and where kindtest keeps
// its files in the nodes.

package kindtest

import (
	"fmt"
	"net/netip"

	"github.com/kindtest/kindtest/internal/imageref"
)

// KubernetesVersion is the version the default node image carries.
const KubernetesVersion = imageref.KubernetesVersion

// The default cluster-wide address ranges (WithPodSubnet,
// WithServiceSubnet), kind's. They stay clear of the engine's default
// address pools (172.17.0.0/12 and 192.168.0.0/16).
const (
	defaultPodSubnet     = "10.244.0.0/16"
	defaultServiceSubnet = "10.96.0.0/16"
	dnsDomain            = "cluster.local"
)

// apiServerPort is where kube-apiserver listens inside the control plane.
const apiServerPort = 6443

// Where the nodes' container runtime listens, and where kindtest keeps
// kubeadm's files and reads the kubeconfigs in the control plane.
const (
	criSocket         = "unix:///run/containerd/containerd.sock"
	kubeadmConfigPath = "/etc/kindtest/kubeadm.yaml"
	// discoveryKubeconfigPath is where a joining node's kubeadm finds the
	// API server and the cluster's CA (see kubeadmJoin).
	discoveryKubeconfigPath = "/etc/kindtest/discovery.conf"
	adminKubeconfig         = "/etc/kubernetes/admin.conf"
	// superAdminKubeconfig is in group system:masters, which no RBAC
	// binding is needed for: kindtest creates the add-ons with it.
	superAdminKubeconfig = "/etc/kubernetes/super-admin.conf"
)

// podSubnet is the cluster's pod range.
func (s shape) podSubnet() string {
	if s.pods == "" {
		return defaultPodSubnet
	}
	return s.pods
}

// serviceSubnet is the cluster's Service range.
func (s shape) serviceSubnet() string {
	if s.services == "" {
		return defaultServiceSubnet
	}
	return s.services
}

// nodePodSubnet is the pod range of node i: the i-th /24 of the pod
// range. Each node owns a fixed /24, so the pod network is known before
// any node boots and needs no controller.
func (s shape) nodePodSubnet(i int) string {
	p := netip.MustParsePrefix(s.podSubnet())
	a := p.Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += uint32(i) << 8
	return fmt.Sprintf("%d.%d.%d.0/24", byte(n>>24), byte(n>>16), byte(n>>8))
}
