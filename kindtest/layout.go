// The fixed layout of every cluster: its address ranges, the API
// server's port, the container runtime's socket and where kindtest keeps
// its files in the nodes.

package kindtest

import (
	"fmt"

	"github.com/kindtest/kindtest/internal/imageref"
)

// KubernetesVersion is the version the default node image carries.
const KubernetesVersion = imageref.KubernetesVersion

// Cluster-wide address ranges. They stay clear of the engine's default
// address pools (172.17.0.0/12 and 192.168.0.0/16).
const (
	podSubnet     = "10.244.0.0/16"
	serviceSubnet = "10.96.0.0/16"
	dnsDomain     = "cluster.local"
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

// nodePodSubnet is the pod range of node i. Each node owns a fixed /24, so
// the pod network is known before any node boots and needs no controller.
func nodePodSubnet(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }
