package bootstrap

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
)

// Arg is a component's command-line flag, --Name=Value.
type Arg struct{ Name, Value string }

// Taint is a node taint, Key[=Value]:Effect.
type Taint struct{ Key, Value, Effect string }

// NodeRegistration is how a node registers: kubeadm's nodeRegistration.
type NodeRegistration struct {
	// Name is the node's name.
	Name string
	// CRISocket is the container runtime's endpoint.
	CRISocket string
	// KubeletArgs are the kubelet's flags, in order.
	KubeletArgs []Arg
	// Taints are the node's taints; none leaves kubeadm's default (the
	// control-plane taint on a control plane).
	Taints []Taint
	// Untainted, with no Taints, writes an empty taint list, which tells
	// kubeadm not to taint a control plane.
	Untainted bool
}

// KubeletConfig is a node's KubeletConfiguration: kindtest's fields
// (systemd's cgroup driver, no swap check, no image garbage collection,
// no disk-pressure evictions, every image on the node usable without
// pull credentials), Fields merged over them and the gates.
type KubeletConfig struct {
	// Version is the kubelet's Kubernetes version, vMAJOR.MINOR.PATCH; ""
	// stands for a current one.
	Version string
	// CgroupV1 says the node runs on a cgroup v1 host, which the kubelet
	// refuses unless told otherwise.
	CgroupV1 bool
	// OOMScoreAdj, if not nil, is the OOM score the kubelet keeps: the
	// node's, which it cannot lower (see KubeletOOMScoreAdj).
	OOMScoreAdj *int
	// Fields are more KubeletConfiguration fields, merged as Merge does.
	Fields map[string]any
	// FeatureGates are the kubelet's feature gates.
	FeatureGates map[string]bool
}

// InitConfig is what the first control plane's kubeadm configuration
// holds: its InitConfiguration, ClusterConfiguration,
// KubeletConfiguration and KubeProxyConfiguration.
type InitConfig struct {
	// ClusterName is kubeadm's name of the cluster.
	ClusterName string
	// KubernetesVersion is the version the node image carries.
	KubernetesVersion string
	// Token is the bootstrap token the other nodes join with.
	Token string
	// AdvertiseAddress is the control plane's address.
	AdvertiseAddress string
	// APIServerPort is where the API server listens, on the control plane
	// and on ControlPlaneEndpoint.
	APIServerPort int
	// ControlPlaneEndpoint is the host of the address every node reaches
	// the API server at.
	ControlPlaneEndpoint string
	// Node is how the control plane registers.
	Node NodeRegistration
	// Timeout is every time limit kubeadm has.
	Timeout time.Duration
	// CertSANs are the API server certificate's names besides 127.0.0.1
	// and localhost.
	CertSANs []string
	// PodSubnet is the cluster's pod range, also kube-proxy's cluster CIDR.
	PodSubnet string
	// ServiceSubnet is the cluster's Service range.
	ServiceSubnet string
	// DNSDomain is the cluster's DNS domain.
	DNSDomain string
	// EtcdArgs, APIServerArgs, ControllerManagerArgs and SchedulerArgs
	// are the control plane's components' flags, in order.
	EtcdArgs, APIServerArgs, ControllerManagerArgs, SchedulerArgs []Arg
	// APIServerEnv is the API server's environment variables.
	APIServerEnv []Arg
	// PatchesDir, when set, is the directory of kubeadm patches for the
	// static pods (ShimGroupPatches). kubeadm's printed add-on manifests
	// come out broken when the configuration names patches, so the
	// configuration those are printed with leaves it empty (see Preboot).
	PatchesDir string
	// ServingCertDir, when set, is mounted into the controller-manager
	// and the scheduler, for their serving certificates.
	ServingCertDir string
	// Kubelet is the control plane's kubelet configuration.
	Kubelet KubeletConfig
	// FeatureGates are kube-proxy's feature gates (the other components
	// take theirs in their flags or in Kubelet).
	FeatureGates map[string]bool
	// KubeProxyMode is kube-proxy's mode: iptables, nftables or ipvs; ""
	// leaves out the KubeProxyConfiguration, for a cluster without
	// kube-proxy.
	KubeProxyMode string
	// InUserNamespace says the nodes run in a user namespace (a rootless
	// engine), where kube-proxy cannot set the conntrack timeouts.
	InUserNamespace bool
}

// JoinConfig is what a joining node's kubeadm configuration holds: its
// JoinConfiguration and KubeletConfiguration.
type JoinConfig struct {
	// DiscoveryFile is where the node holds the kubeconfig that names the
	// API server it joins through and the cluster's CA (see
	// DiscoveryKubeconfig).
	DiscoveryFile string
	// APIServerPort is the API server's port on a joining control plane.
	APIServerPort int
	// Token is the bootstrap token.
	Token string
	// ControlPlaneAddress is a joining control plane's own address, where
	// its API server listens; "" for a worker.
	ControlPlaneAddress string
	// PatchesDir, for a control plane, is the directory of kubeadm
	// patches for its static pods (ShimGroupPatches).
	PatchesDir string
	// Node is how the node registers.
	Node NodeRegistration
	// Timeout is every time limit kubeadm has.
	Timeout time.Duration
	// Kubelet is the node's kubelet configuration.
	Kubelet KubeletConfig
}

//go:embed kubeadm.tmpl
var kubeadmTemplate string

var templates = template.Must(template.New("kubeadm").Funcs(template.FuncMap{
	"quote":   strconv.Quote,
	"kubelet": KubeletConfig.YAML,
	"args": func(indent, key string, args []Arg) argList {
		return argList{Indent: indent, Key: key, Args: args}
	},
}).Parse(kubeadmTemplate))

// argList is an extraArgs list as the template writes it.
type argList struct {
	Indent, Key string
	Args        []Arg
}

// YAML renders the first control plane's kubeadm configuration.
func (c InitConfig) YAML() string { return render(templates, "init", c) }

// YAML renders a joining node's kubeadm configuration.
func (c JoinConfig) YAML() string { return render(templates, "join", c) }

// DiscoveryKubeconfig is the kubeconfig a joining node discovers the
// cluster with: the API server at server (https://host:port) and the
// cluster's CA certificate, base64-encoded PEM as kubeconfigs hold it, and
// no credentials (the bootstrap token is in the JoinConfiguration).
func DiscoveryKubeconfig(server, caData string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: discovery
  user: {}
contexts:
- name: discovery
  context:
    cluster: cluster
    user: discovery
current-context: discovery
`, server, caData)
}

// render executes the template name of set: kubeadm.tmpl's or the add-on
// manifests'. Their data are fixed structs of strings, numbers and maps,
// so a failure is a bug of this package, which its golden tests catch.
func render(set *template.Template, name string, data any) string {
	var b strings.Builder
	if err := set.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("bootstrap: render %s: %v", name, err))
	}
	return b.String()
}

// YAML renders k as a KubeletConfiguration document, its fields sorted.
// The kubelet uses containerd's cgroup driver: systemd's on cgroup v2,
// cgroupfs on cgroup v1 (see provision.sh).
func (k KubeletConfig) YAML() string {
	cfg := map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"cgroupDriver":                "systemd",
		"failSwapOn":                  false,
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		// No disk-pressure evictions: the nodes share the host's disk.
		"evictionHard": map[string]any{
			"imagefs.available": "0%",
			"nodefs.available":  "0%",
			"nodefs.inodesFree": "0%",
		},
	}
	if k.ensuresSecretPulledImages() {
		// Under this gate the kubelet's default policy
		// (NeverVerifyPreloadedImages) lets a pod use an image it did not
		// pull (an image LoadImage imported, the preloaded components)
		// only until the kubelet pulls that same image ID itself, say from
		// the cluster's registry: from then on every other name of the ID
		// needs its pull credentials checked, and a pod with
		// imagePullPolicy Never fails with ErrImageNeverPull. A test
		// cluster has one tenant: every image on the node stays usable,
		// as before the gate. The allowlist policy would have to name
		// each image before the kubelet starts, and LoadImage takes any
		// name at any time.
		cfg["imagePullCredentialsVerificationPolicy"] = "NeverVerify"
	}
	if k.CgroupV1 {
		// The kubelet (1.37) refuses cgroup v1 hosts (still common on CI
		// runners) unless told otherwise; on v2 the default stands.
		cfg["failCgroupV1"] = false
		cfg["cgroupDriver"] = "cgroupfs"
	}
	if k.OOMScoreAdj != nil {
		cfg["oomScoreAdj"] = *k.OOMScoreAdj
	}
	Merge(cfg, k.Fields)
	if len(k.FeatureGates) > 0 {
		cfg["featureGates"] = k.FeatureGates
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		// Only maps, strings, numbers and booleans are in it.
		panic(fmt.Sprintf("bootstrap: kubelet configuration: %v", err))
	}
	return b.String()
}

// secretPulledImagesGate is the kubelet feature gate under which it checks
// pull credentials again for images already on the node: alpha (off) in
// Kubernetes 1.33 and 1.34, beta (on) from 1.35. Without it the kubelet
// refuses imagePullCredentialsVerificationPolicy.
const secretPulledImagesGate = "KubeletEnsureSecretPulledImages"

// ensuresSecretPulledImages reports whether the kubelet runs with
// secretPulledImagesGate on: as the gates say, else as its version's
// default.
func (k KubeletConfig) ensuresSecretPulledImages() bool {
	if on, ok := k.FeatureGates[secretPulledImagesGate]; ok {
		return on
	}
	var major, minor int
	if _, err := fmt.Sscanf(k.Version, "v%d.%d", &major, &minor); err != nil {
		return true // a current kubelet
	}
	return major > 1 || minor >= 35
}

// Merge merges src into dst: mappings key by key, any other value
// replaces dst's. Mappings of src are copied, not shared.
func Merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				Merge(dm, sm)
				continue
			}
			cp := map[string]any{}
			Merge(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}
