package kindtest

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// Component names a Kubernetes component whose command line
// WithComponentArgs extends.
type Component string

// The components WithComponentArgs accepts.
const (
	KubeAPIServer         Component = "kube-apiserver"
	KubeControllerManager Component = "kube-controller-manager"
	KubeScheduler         Component = "kube-scheduler"
	Etcd                  Component = "etcd"
	Kubelet               Component = "kubelet"
)

// Mount is a path of the engine's host mounted into a node container.
type Mount struct {
	// HostPath is an absolute path on the engine's host.
	HostPath string
	// ContainerPath is an absolute path in the node container.
	ContainerPath string
	// ReadOnly mounts it read-only.
	ReadOnly bool
}

// settings are the cluster settings that WithFeatureGates, WithRuntimeConfig,
// WithComponentArgs, WithKubeletConfig and the node options set: what the
// components run with and what the nodes carry. The zero value is the
// default cluster.
type settings struct {
	featureGates  map[string]bool
	runtimeConfig map[string]string
	args          map[Component][]arg // in the order given; a later name replaces an earlier one
	kubeletConfig map[string]any      // merged patches
	nodeLabels    map[int]map[string]string
	nodeTaints    map[int][]taint
	nodeMounts    map[int][]Mount
}

type arg struct{ name, value string }

type taint struct{ key, value, effect string }

func (t taint) String() string {
	if t.value == "" {
		return t.key + ":" + t.effect
	}
	return t.key + "=" + t.value + ":" + t.effect
}

var gateNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

var runtimeConfigKeyPattern = regexp.MustCompile(`^(v1|[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]+(/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?)$`)

// flagRule says what kindtest does with a flag it sets itself.
type flagRule struct {
	// use is non-empty for flags kindtest owns: an argument setting it is
	// refused with this advice.
	use string
}

// ownFlags are the flags, per component, that kindtest or kubeadm sets from
// the cluster's layout, so that changing them would break the cluster or
// another option sets them. Flags kindtest only tunes (etcd's
// unsafe-no-fsync, the API server's watch-cache, the controller-manager's
// and scheduler's leader-elect, the controller-manager's kube-api-qps and
// kube-api-burst) may be overridden: the argument given replaces
// kindtest's value.
var ownFlags = map[Component]map[string]string{
	KubeAPIServer: {
		"feature-gates":            "use WithFeatureGates",
		"runtime-config":           "use WithRuntimeConfig",
		"advertise-address":        "kindtest advertises the control plane's address on the cluster network",
		"secure-port":              "kindtest publishes the API server's port 6443",
		"etcd-servers":             "kindtest runs a local etcd for the API server",
		"service-cluster-ip-range": "use WithServiceSubnet",
	},
	KubeControllerManager: {
		"feature-gates":            "use WithFeatureGates",
		"allocate-node-cidrs":      "kindtest gives each node a fixed pod range (the pod subnet's /24 of the node's index) before boot",
		"cluster-cidr":             "use WithPodSubnet",
		"service-cluster-ip-range": "use WithServiceSubnet",
	},
	KubeScheduler: {
		"feature-gates": "use WithFeatureGates",
	},
	Etcd: {
		"data-dir": "kubeadm keeps etcd's data in /var/lib/etcd",
	},
	Kubelet: {
		"feature-gates":              "use WithFeatureGates",
		"node-ip":                    "kindtest sets the node's address on the cluster network",
		"node-labels":                "use WithNodeLabels",
		"register-with-taints":       "use WithNodeTaints",
		"config":                     "use WithKubeletConfig",
		"kubeconfig":                 "kubeadm writes the kubelet's kubeconfig",
		"bootstrap-kubeconfig":       "kubeadm writes the kubelet's kubeconfig",
		"hostname-override":          "node names are kindtest's",
		"container-runtime-endpoint": "the nodes run containerd at " + criSocket,
	},
}

var flagNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// setArg sets a in list, replacing an argument of the same name in place.
func setArg(list []arg, a arg) []arg {
	for i := range list {
		if list[i].name == a.name {
			list[i] = a
			return list
		}
	}
	return append(list, a)
}

// kubeletConfigOwn are KubeletConfiguration fields WithKubeletConfig may
// not set, and why.
var kubeletConfigOwn = map[string]string{
	"apiVersion":   "kindtest writes kubelet.config.k8s.io/v1beta1",
	"kind":         "kindtest writes a KubeletConfiguration",
	"cgroupDriver": "the kubelet uses containerd's driver (systemd's on cgroup v2, cgroupfs on v1)",
	"featureGates": "use WithFeatureGates",
}

// nodeIndexLabel is the label kindtest puts on every node.
const nodeIndexLabel = lifetime.KubeLabelNodeIndex

var (
	labelNamePattern = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dnsSubdomain     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// kubeletLabels are the kubernetes.io labels the kubelet accepts in
	// --node-labels besides the node.kubernetes.io and
	// kubelet.kubernetes.io namespaces.
	kubeletLabels = map[string]bool{
		"kubernetes.io/hostname": true, "kubernetes.io/arch": true, "kubernetes.io/os": true,
		"beta.kubernetes.io/arch": true, "beta.kubernetes.io/os": true, "beta.kubernetes.io/instance-type": true,
		"node.kubernetes.io/instance-type":         true,
		"failure-domain.beta.kubernetes.io/region": true, "failure-domain.beta.kubernetes.io/zone": true,
		"topology.kubernetes.io/region": true, "topology.kubernetes.io/zone": true,
	}
)

// checkQualifiedName checks a label or taint key: [prefix/]name.
func checkQualifiedName(k string) error {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		prefix, name = "", k
	}
	switch {
	case found && (len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)):
		return fmt.Errorf("key prefix %q is not a DNS subdomain", prefix)
	case len(name) > 63 || !labelNamePattern.MatchString(name):
		return fmt.Errorf("key name %q: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", name)
	}
	return nil
}

func checkLabelValue(v string) error {
	if v != "" && (len(v) > 63 || !labelNamePattern.MatchString(v)) {
		return fmt.Errorf("value %q: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", v)
	}
	return nil
}

func checkLabel(k, v string) error {
	if err := checkQualifiedName(k); err != nil {
		return err
	}
	if err := checkLabelValue(v); err != nil {
		return err
	}
	if k == nodeIndexLabel {
		return errors.New("kindtest sets this label itself")
	}
	prefix, _, found := strings.Cut(k, "/")
	if !found || kubeletLabels[k] {
		return nil
	}
	for _, ns := range []string{"kubernetes.io", "k8s.io"} {
		if prefix != ns && !strings.HasSuffix(prefix, "."+ns) {
			continue
		}
		for _, ok := range []string{"node.kubernetes.io", "kubelet.kubernetes.io"} {
			if prefix == ok || strings.HasSuffix(prefix, "."+ok) {
				return nil
			}
		}
		return fmt.Errorf("the kubelet refuses labels in the %s namespace other than node.kubernetes.io/..., kubelet.kubernetes.io/... and a few well-known ones: apply it with `kubectl label` once the cluster is up", ns)
	}
	return nil
}

func parseTaint(s string) (taint, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return taint{}, errors.New("write key=value:Effect or key:Effect")
	}
	kv, effect := s[:i], s[i+1:]
	switch effect {
	case "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return taint{}, fmt.Errorf("effect %q: use NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
	k, v, _ := strings.Cut(kv, "=")
	if err := checkQualifiedName(k); err != nil {
		return taint{}, err
	}
	if err := checkLabelValue(v); err != nil {
		return taint{}, err
	}
	return taint{k, v, effect}, nil
}

// reservedMountPoints are the node paths kindtest itself mounts, or that
// a mount over would break the node.
var reservedMountPoints = []string{"/", "/var", "/tmp", "/run", "/lib/modules", "/proc", "/sys", "/dev", "/etc", "/usr"}

func checkMount(m Mount) error {
	for _, p := range []struct{ what, p string }{{"host path", m.HostPath}, {"container path", m.ContainerPath}} {
		switch {
		case !path.IsAbs(p.p):
			return fmt.Errorf("%s %q is not absolute", p.what, p.p)
		case strings.ContainsAny(p.p, ":,"):
			return fmt.Errorf("%s %q: ':' and ',' cannot be mounted", p.what, p.p)
		}
	}
	if slices.Contains(reservedMountPoints, path.Clean(m.ContainerPath)) {
		return fmt.Errorf("container path %s is one kindtest or the node's system needs: mount below another directory", path.Clean(m.ContainerPath))
	}
	return nil
}

// checkFeatureGates checks the gates against the generated list of
// featureGatesVersion's gates.
func (s *settings) checkFeatureGates() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s.featureGates)) {
		spec, ok := knownFeatureGates[name]
		if !ok {
			hint := ""
			for known := range knownFeatureGates {
				if strings.EqualFold(known, name) {
					hint = fmt.Sprintf(" (did you mean %s?)", known)
				}
			}
			errs = append(errs, fmt.Errorf("feature gate %s: not a feature gate of Kubernetes %s%s", name, featureGatesVersion, hint))
			continue
		}
		if spec.locked && s.featureGates[name] != spec.enabled {
			errs = append(errs, fmt.Errorf("feature gate %s=%t: %s in Kubernetes %s and locked to %t", name, s.featureGates[name], spec.stage, featureGatesVersion, spec.enabled))
		}
	}
	return errs
}

// binds are node i's extra mounts as the engine's "src:dst[:ro]".
func (s *settings) binds(i int) []string {
	var out []string
	for _, m := range s.nodeMounts[i] {
		b := m.HostPath + ":" + m.ContainerPath
		if m.ReadOnly {
			b += ":ro"
		}
		out = append(out, b)
	}
	return out
}

// The rendering of the settings into kubeadm's configuration.

// joinLabels is labels as --node-labels takes them, sorted.
func joinLabels(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// joinMap is m as k=v,k=v, sorted, the form of --feature-gates and
// --runtime-config.
func joinMap[V any](m map[string]V) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// componentArgs is the extraArgs list of a component: kindtest's
// defaults, then what the settings add, a later name replacing an earlier.
func (s *settings) componentArgs(comp Component, defaults ...arg) []arg {
	list := slices.Clone(defaults)
	if len(s.featureGates) > 0 && comp != Etcd {
		list = setArg(list, arg{"feature-gates", joinMap(s.featureGates)})
	}
	if len(s.runtimeConfig) > 0 && comp == KubeAPIServer {
		list = setArg(list, arg{"runtime-config", joinMap(s.runtimeConfig)})
	}
	for _, a := range s.args[comp] {
		list = setArg(list, a)
	}
	return list
}

// taints are node n's taints as kubeadm's nodeRegistration takes them:
// none for kubeadm's default (the control-plane taint on a control plane,
// none on a worker), and untainted for a control plane that must run
// workloads.
func (s *settings) taints(n *Node, singleNode bool) (taints []bootstrap.Taint, untainted bool) {
	isControlPlane := n.index == 0 || n.role == RoleControlPlane
	if isControlPlane && !singleNode && len(s.nodeTaints[n.index]) > 0 {
		// Given taints replace kubeadm's default: keep it.
		taints = append(taints, bootstrap.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: "NoSchedule"})
	}
	for _, t := range s.nodeTaints[n.index] {
		taints = append(taints, bootstrap.Taint{Key: t.key, Value: t.value, Effect: t.effect})
	}
	// An empty list, unlike none, tells kubeadm not to taint the control
	// plane: a single node must run workloads.
	return taints, len(taints) == 0 && isControlPlane && singleNode
}
