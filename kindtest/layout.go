// The fixed layout of every cluster: its address ranges, the API
// server's port, the container runtime's socket and where kindtest keeps
// its files in the nodes.

package kindtest

import (
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
	// kubeadmAddonConfigPath is the first control plane's configuration
	// without patches, which kubeadm prints its add-ons with (see
	// bootstrap.Preboot).
	kubeadmAddonConfigPath = "/etc/kindtest/kubeadm-addons.yaml"
	// discoveryKubeconfigPath is where a joining node's kubeadm finds the
	// API server and the cluster's CA (see kubeadmJoin).
	discoveryKubeconfigPath = "/etc/kindtest/discovery.conf"
	adminKubeconfig         = "/etc/kubernetes/admin.conf"
	// superAdminKubeconfig is in group system:masters, which no RBAC
	// binding is needed for: kindtest creates the add-ons with it.
	superAdminKubeconfig = "/etc/kubernetes/super-admin.conf"
)
