// Every option of New and Start, each with its doc and default: the
// config they set, defaultConfig (the one place defaults are set), the one
// validate that checks them all in order, and the shape of a reusable
// cluster that reuse matches clusters by (reuseHash).

package kindtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/imageref"
)

// DefaultImage is the node image clusters use unless WithImage says
// otherwise. Build it with `go run ./cmd/kindtest build` in a kindtest
// checkout.
const DefaultImage = imageref.Node

// Image returns the node image Start and New use when no WithImage is
// given: KINDTEST_IMAGE when it is set, else DefaultImage. Tools that
// drive clusters (benchmarks, conformance runs) name the same image with
// it.
func Image() string {
	if v := getenv(envImage); v != "" {
		return v
	}
	return DefaultImage
}

// Logger receives progress lines. *testing.T's Logf, log.Printf and
// fmt.Printf-like functions fit through LoggerFunc.
type Logger interface {
	Printf(format string, args ...any)
}

// LoggerFunc adapts a Printf-like function to Logger.
type LoggerFunc func(format string, args ...any)

// Printf calls f.
func (f LoggerFunc) Printf(format string, args ...any) { f(format, args...) }

type discard struct{}

func (discard) Printf(string, ...any) {}

// KeepPolicy says when a cluster outlives its test. One rule applies
// wherever a cluster's end is decided: at the end of its test, on SIGINT
// or SIGTERM, at the test binary's deadline, in the reaper and in the
// orphan sweep (see the README's table).
type KeepPolicy int

const (
	// KeepNever removes the cluster however its test or process ends. The
	// default.
	KeepNever KeepPolicy = iota
	// KeepOnFailure keeps the cluster when its test is seen to fail: a
	// failed or panicking test, a failed creation, or the test binary's
	// -timeout. It is removed when the test passes, when the process is
	// interrupted (SIGINT, SIGTERM), and when the process dies without a
	// word (SIGKILL, a crash), since no failure was seen to debug.
	KeepOnFailure
	// KeepAlways keeps the cluster whatever the outcome.
	KeepAlways
)

// String names the policy as KINDTEST_KEEP spells it.
func (k KeepPolicy) String() string {
	switch k {
	case KeepOnFailure:
		return "on-failure"
	case KeepAlways:
		return "always"
	default:
		return "never"
	}
}

// Option configures a cluster. Options are applied in order; conflicts
// between them are reported once all have been applied.
type Option func(*config) error

// config is what the options set. The part that makes a cluster what it
// is, and so decides which kept cluster a run may reuse, is its shape;
// the rest says how it is made, logged and ended.
type config struct {
	shape
	image         string // in the reuse hash by the image's ID
	logger        Logger
	createTimeout time.Duration
	deleteTimeout time.Duration
	keep          KeepPolicy
	artifactsDir  string
	reuse         bool
	runtime       string // OCI runtime of the nodes; set only by tests
	// initWrapper is put before `kubeadm init` in the init script; set
	// only by tests, to make init fail.
	initWrapper string
	// pool is the id of the pool that makes this cluster (see NewPool);
	// set only by the pool. Such a creation never claims one.
	pool string
}

// shape is what makes two clusters interchangeable for reuse
// (WithReuse): every option that changes what the cluster is. A run
// attaches only to a kept cluster of the same shape and node image (see
// reuseHash). A new config field goes here, or into config with a reason
// on TestConfigFieldsAreShapeOrNot's list.
type shape struct {
	workers       int    // WithWorkers
	controlPlanes int    // WithControlPlanes
	kubernetes    bool   // WithoutKubernetes
	prefix        string // WithNamePrefix
	// settings are what WithFeatureGates, WithRuntimeConfig,
	// WithComponentArgs, WithKubeletConfig, WithNodeLabels,
	// WithNodeTaints and WithNodeMounts set.
	settings settings
	// portMappings publish node ports of the control plane on the host
	// (WithPortMapping).
	portMappings         []portMapping
	registry             bool             // WithRegistry
	mirrors              []registryMirror // WithRegistryMirror
	noDefaultCNI         bool             // WithoutDefaultCNI
	withoutStorage       bool             // WithoutStorage
	withoutNetworkPolicy bool             // WithoutNetworkPolicy
	// proxy is the test process's HTTP_PROXY, HTTPS_PROXY and NO_PROXY,
	// which the nodes' units get (see proxySettings).
	proxy proxySettings
	// kubeProxyMode is kube-proxy's mode (WithKubeProxyMode); "" is
	// iptables.
	kubeProxyMode KubeProxyMode
	// pods and services are the pod and Service ranges (WithPodSubnet,
	// WithServiceSubnet) that are not the default of their family,
	// comma-separated, IPv4 first; "" is the defaults.
	pods, services string
	// ipFamily is the cluster's IP family (WithIPFamily); "" is IPv4.
	ipFamily IPFamily
	// withoutLoadBalancer: LoadBalancer Services get no load balancer
	// (WithoutLoadBalancer).
	withoutLoadBalancer bool
}

// portMapping publishes nodePort of the control-plane node on hostPort of
// the engine's host (0: a port the engine chooses).
type portMapping struct {
	hostPort, nodePort int
}

// registryMirror is one WithRegistryMirror.
type registryMirror struct{ host, endpoint string }

// Limits on user input. Each node is a full container with systemd, a
// container runtime and a kubelet; past a handful they only slow the host.
const (
	maxWorkers   = 16
	maxPrefixLen = 20
)

// maxControlPlanes is the most control planes WithControlPlanes allows:
// etcd's own advice is 3 or 5 members; more only slow down every write.
const maxControlPlanes = 5

var prefixPattern = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

var registryHostPattern = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*(:[0-9]{1,5})?$`)

// defaultConfig is every option's default, the one place they are set
// (each With... says its own).
func defaultConfig() *config {
	return &config{
		shape:         shape{controlPlanes: 1, kubernetes: true, prefix: "kt"},
		image:         DefaultImage,
		logger:        discard{},
		createTimeout: 5 * time.Minute,
		deleteTimeout: time.Minute,
	}
}

func newConfig(opts []Option) (*config, error) {
	cfg := defaultConfig()
	if err := cfg.fromEnv(); err != nil {
		return nil, err
	}
	var errs []error
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	// Conflicts are checked even when an option failed, so that every
	// mistake is reported at once.
	if err := errors.Join(append(errs, cfg.validate())...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// fromEnv applies the environment variables a user sets without touching
// code; options given in code come after and win.
func (c *config) fromEnv() error {
	c.image = Image()
	if v := getenv(envKeep); v != "" {
		k, err := parseKeep(v)
		if err != nil {
			return err
		}
		c.keep = k
	}
	if v := getenv(envReuse); v != "" {
		switch v {
		case "1", "true", "yes":
			c.reuse = true
		case "0", "false", "no":
		default:
			return fmt.Errorf("KINDTEST_REUSE=%q: want 1 or 0", v)
		}
	}
	if v := getenv(envArtifacts); v != "" {
		c.artifactsDir = v
	}
	c.proxy = proxyFromEnv()
	return nil
}

func parseKeep(v string) (KeepPolicy, error) {
	switch v {
	case "never", "0", "false":
		return KeepNever, nil
	case "on-failure":
		return KeepOnFailure, nil
	case "always", "1", "true":
		return KeepAlways, nil
	}
	return KeepNever, fmt.Errorf("KINDTEST_KEEP=%q: want never, on-failure or always", v)
}

// validate checks the configuration once every option is applied: every
// check, in this order, so that all mistakes are reported at once. What
// needs the node image or the engine's place is checked by prepare, still
// before anything is created (checkVersion, checkMountSources, the
// sidecar images).
func (c *config) validate() error {
	var errs []error
	// The nodes: WithWorkers, WithControlPlanes, WithoutKubernetes.
	if c.workers < 0 {
		errs = append(errs, fmt.Errorf("workers: %d is negative: use 0 for a single control-plane node", c.workers))
	}
	if c.workers > maxWorkers {
		errs = append(errs, fmt.Errorf("workers: %d: at most %d are allowed, each worker being a full node container", c.workers, maxWorkers))
	}
	errs = append(errs, c.validateControlPlanes()...)
	// WithImage, WithNamePrefix.
	if c.image == "" {
		errs = append(errs, errors.New("image: empty: leave WithImage out to use "+DefaultImage))
	}
	if len(c.prefix) > maxPrefixLen {
		errs = append(errs, fmt.Errorf("name prefix %q: %d characters, at most %d", c.prefix, len(c.prefix), maxPrefixLen))
	} else if !prefixPattern.MatchString(c.prefix) {
		errs = append(errs, fmt.Errorf("name prefix %q: use lowercase letters, digits and '-', starting with a letter and not ending with '-'", c.prefix))
	}
	// WithCreateTimeout, WithDeleteTimeout.
	if c.createTimeout <= 0 {
		errs = append(errs, fmt.Errorf("create timeout %v: must be positive", c.createTimeout))
	}
	if c.deleteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("delete timeout %v: must be positive", c.deleteTimeout))
	}
	// The settings: node indexes, mounts, and what needs Kubernetes.
	errs = append(errs, c.validateSettings()...)
	// WithPortMapping.
	errs = append(errs, validatePortMappings(c.portMappings)...)
	// WithRegistryMirror.
	errs = append(errs, c.validateRegistry()...)
	// HTTP_PROXY, HTTPS_PROXY, NO_PROXY of the test process.
	errs = append(errs, c.proxy.validate()...)
	// WithoutDefaultCNI.
	if c.noDefaultCNI && !c.kubernetes {
		errs = append(errs, errors.New("WithoutDefaultCNI replaces Kubernetes' pod network, which WithoutKubernetes leaves out altogether: drop one of them"))
	}
	// WithPodSubnet, WithServiceSubnet, WithIPFamily.
	errs = append(errs, c.validateSubnets()...)
	// WithKubeProxyMode.
	if c.kubeProxyMode != "" && !c.kubernetes {
		errs = append(errs, fmt.Errorf("kube-proxy mode %s: kube-proxy is part of Kubernetes, which WithoutKubernetes leaves out: drop one of them", c.kubeProxyMode))
	}
	return errors.Join(errs...)
}

// The options: the nodes, how the cluster is made and ended, the
// Kubernetes settings, networking and add-ons, and kind's configuration
// file.

// WithWorkers sets the number of worker nodes besides the one control-plane
// node. Default 0: a single node that runs workloads too.
func WithWorkers(n int) Option {
	return func(c *config) error { c.workers = n; return nil }
}

// WithControlPlanes sets the number of control-plane nodes: 1, 3 or 5.
// With more than one, every control plane runs the API server,
// controller-manager, scheduler and an etcd member (kubeadm's stacked etcd),
// behind a load balancer (a container of image LoadBalancerImage, removed
// with the cluster). The kubeconfig, the nodes' kubelets and the API
// server's address within the cluster all go through the load balancer,
// so the API stays available while any one control plane of three is
// stopped (Node.Stop).
//
// Nodes are indexed, for WithNodeLabels, WithNodeTaints and WithMount, as
// with one control plane: 0 is the first control plane, 1 to w the
// workers of WithWorkers(w), and w+1 to w+n-1 the other control planes.
// They are named <cluster>-control-plane, <cluster>-control-plane2, ...
// Without workers, every control plane runs workloads. Default: 1.
func WithControlPlanes(n int) Option {
	return func(c *config) error { c.controlPlanes = n; return nil }
}

// WithImage sets the node image. Default DefaultImage, or KINDTEST_IMAGE
// when set.
func WithImage(ref string) Option {
	return func(c *config) error { c.image = ref; return nil }
}

// WithNamePrefix sets the prefix of the generated cluster name: lowercase
// letters, digits and '-', at most 20 characters. Default "kt".
func WithNamePrefix(prefix string) Option {
	return func(c *config) error { c.prefix = prefix; return nil }
}

// WithLogger sets where progress lines go. Default: the test's log in
// Start, nowhere in New.
func WithLogger(l Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("logger: nil: leave WithLogger out for the default")
		}
		c.logger = l
		return nil
	}
}

// WithCreateTimeout bounds the whole creation of a cluster. Default 5m.
func WithCreateTimeout(d time.Duration) Option {
	return func(c *config) error { c.createTimeout = d; return nil }
}

// WithDeleteTimeout bounds the removal of a cluster. Default 1m.
func WithDeleteTimeout(d time.Duration) Option {
	return func(c *config) error { c.deleteTimeout = d; return nil }
}

// WithKeep says when Start leaves the cluster in place after the test, for
// debugging; it logs the commands to inspect and delete it. Default
// KeepNever, or KINDTEST_KEEP (never, on-failure, always) when set.
func WithKeep(k KeepPolicy) Option {
	return func(c *config) error {
		if k < KeepNever || k > KeepAlways {
			return fmt.Errorf("keep policy %d: use KeepNever, KeepOnFailure or KeepAlways", k)
		}
		c.keep = k
		return nil
	}
}

// WithoutKubernetes stops the lifecycle once systemd runs on every node:
// no kubeadm, no pod network. For tests of node-level behaviour. Default:
// Kubernetes is set up.
func WithoutKubernetes() Option {
	return func(c *config) error { c.kubernetes = false; return nil }
}

// WithArtifactsDir sets where logs are exported when a test fails. Default
// $ARTIFACTS when set, else the test's temporary directory.
func WithArtifactsDir(dir string) Option {
	return func(c *config) error { c.artifactsDir = dir; return nil }
}

// WithReuse makes the cluster outlive the test for the edit-test loop: the
// first run creates and keeps it, later runs with the same node image and
// the same options that shape a cluster (workers, control planes,
// Kubernetes or not, name prefix, settings, port mappings, registry,
// mirrors, default CNI, storage and NetworkPolicy agent or not) attach to
// it in about a second. A cluster in use by another run is never
// attached to.
// When a run ends, its namespaces (all but default and the kube-* ones)
// and the namespaced objects it left in default are deleted; cluster-scoped
// objects and loaded images stay. Delete then releases the cluster rather
// than removing it; `kindtest delete` or `kindtest prune -all` remove it.
// Default off, or on when KINDTEST_REUSE=1.
func WithReuse() Option {
	return func(c *config) error { c.reuse = true; return nil }
}

// WithFeatureGates turns Kubernetes feature gates on or off in every
// component: kube-apiserver, kube-controller-manager and kube-scheduler
// (--feature-gates), the kubelet (featureGates of its
// KubeletConfiguration) and kube-proxy (featureGates of its
// KubeProxyConfiguration). Several calls add up; a later value for a gate
// wins. Default: none, every gate at its default.
//
// Gate names are checked before anything is created against the list of
// gates of KubernetesVersion generated from the Kubernetes source (unknown
// gates, and locked gates set against their locked value, are errors).
// When the node image carries another Kubernetes version only the syntax
// is checked here; the node's kubelet then checks the gates before boot and
// its refusal is the error.
func WithFeatureGates(gates map[string]bool) Option {
	return func(c *config) error {
		var errs []error
		for _, name := range slices.Sorted(maps.Keys(gates)) {
			if !gateNamePattern.MatchString(name) {
				errs = append(errs, fmt.Errorf("feature gate %q: a gate name is letters and digits, starting with a letter (e.g. ContainerStopSignals)", name))
				continue
			}
			if c.settings.featureGates == nil {
				c.settings.featureGates = map[string]bool{}
			}
			c.settings.featureGates[name] = gates[name]
		}
		return errors.Join(errs...)
	}
}

// WithRuntimeConfig enables or disables API groups and versions in the
// API server (its --runtime-config), e.g. {"api/alpha": "true"} or
// {"internal.apiserver.k8s.io/v1alpha1": "true"}. Several calls add up; a
// later value for a key wins. Default: none, the API server's defaults.
func WithRuntimeConfig(cfg map[string]string) Option {
	return func(c *config) error {
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			v := cfg[k]
			switch {
			case !runtimeConfigKeyPattern.MatchString(k):
				errs = append(errs, fmt.Errorf("runtime config %q: a key is api/all, api/alpha, api/beta, api/ga, GROUP/VERSION or GROUP/VERSION/RESOURCE", k))
			case v != "true" && v != "false":
				errs = append(errs, fmt.Errorf("runtime config %s=%q: the value is \"true\" or \"false\"", k, v))
			default:
				if c.settings.runtimeConfig == nil {
					c.settings.runtimeConfig = map[string]string{}
				}
				c.settings.runtimeConfig[k] = v
			}
		}
		return errors.Join(errs...)
	}
}

// WithComponentArgs adds command-line flags to a component:
// KubeAPIServer, KubeControllerManager, KubeScheduler and Etcd on the
// control plane, Kubelet on every node. Each argument is "--name=value"
// or "name=value". Several calls add up; a flag given again replaces its
// earlier value, and so does a flag kindtest only tunes (etcd's
// unsafe-no-fsync, the API server's watch-cache, leader-elect,
// kube-api-qps, kube-api-burst). Flags that
// kindtest or kubeadm set from the cluster's layout, or that another
// option sets (feature-gates, runtime-config, node-labels, ...), are
// refused with the reason. Default: none.
func WithComponentArgs(component Component, args ...string) Option {
	return func(c *config) error {
		own, ok := ownFlags[component]
		if !ok {
			return fmt.Errorf("component args: unknown component %q: use KubeAPIServer, KubeControllerManager, KubeScheduler, Etcd or Kubelet", component)
		}
		var errs []error
		for _, a := range args {
			s := strings.TrimPrefix(a, "--")
			name, value, found := strings.Cut(s, "=")
			switch {
			case !found || !flagNamePattern.MatchString(name) || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--"):
				errs = append(errs, fmt.Errorf("component args: %s: %q is not a flag: write --name=value or name=value", component, a))
			case own[name] != "":
				errs = append(errs, fmt.Errorf("component args: %s: --%s is set by kindtest: %s", component, name, own[name]))
			default:
				if c.settings.args == nil {
					c.settings.args = map[Component][]arg{}
				}
				c.settings.args[component] = setArg(c.settings.args[component], arg{name, value})
			}
		}
		return errors.Join(errs...)
	}
}

// WithKubeletConfig merges fields into the KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
// kindtest writes for every node's kubelet: patch is a YAML (or JSON)
// mapping of its fields, e.g. "maxPods: 50\nsystemReserved:\n  memory: 100Mi".
// Mappings merge key by key, any other value replaces kindtest's. Unknown
// top-level fields of KubernetesVersion's KubeletConfiguration are errors,
// and so are apiVersion, kind, cgroupDriver and featureGates (use
// WithFeatureGates). Several calls merge in order. Default: kindtest's
// configuration alone (systemd cgroup driver, no swap check, no image
// garbage collection or disk-pressure eviction).
func WithKubeletConfig(patch string) Option {
	return func(c *config) error {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(patch), &m); err != nil {
			return fmt.Errorf("kubelet config: not a YAML mapping: %w", err)
		}
		if m == nil {
			return errors.New("kubelet config: empty: give a YAML mapping of KubeletConfiguration fields")
		}
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if why := kubeletConfigOwn[k]; why != "" {
				errs = append(errs, fmt.Errorf("kubelet config: field %s: set by kindtest: %s", k, why))
			} else if !knownKubeletConfigFields[k] {
				errs = append(errs, fmt.Errorf("kubelet config: field %s: not a field of the KubeletConfiguration of Kubernetes %s (names are case-sensitive, e.g. maxPods)", k, featureGatesVersion))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if c.settings.kubeletConfig == nil {
			c.settings.kubeletConfig = map[string]any{}
		}
		bootstrap.Merge(c.settings.kubeletConfig, m)
		return nil
	}
}

// WithNodeLabels puts labels on a node: node 0 is the control plane, 1 to
// n the workers of WithWorkers(n), n+1 on the other control planes of
// WithControlPlanes. The kubelet registers the node with
// them (kubeadm's nodeRegistration, --node-labels), so the node has them
// from its first appearance. The kubelet refuses labels in the
// kubernetes.io and k8s.io namespaces other than node.kubernetes.io/...,
// kubelet.kubernetes.io/... and a few well-known ones, so those are
// refused here; add others with `kubectl label` once the cluster is up.
// Several calls add up. Default: only kindtest's kindtest.dev/node-index.
func WithNodeLabels(node int, labels map[string]string) Option {
	return func(c *config) error {
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			v := labels[k]
			if err := checkLabel(k, v); err != nil {
				errs = append(errs, fmt.Errorf("node %d label %s=%s: %w", node, k, v, err))
				continue
			}
			if c.settings.nodeLabels == nil {
				c.settings.nodeLabels = map[int]map[string]string{}
			}
			if c.settings.nodeLabels[node] == nil {
				c.settings.nodeLabels[node] = map[string]string{}
			}
			c.settings.nodeLabels[node][k] = v
		}
		return errors.Join(errs...)
	}
}

// WithNodeTaints taints a node (0 the control plane, 1 to n the workers,
// n+1 on the other control planes of WithControlPlanes) as it registers (kubeadm's nodeRegistration.taints). Each taint is
// "key=value:Effect" or "key:Effect", Effect being NoSchedule,
// PreferNoSchedule or NoExecute. On the control plane of a cluster with
// workers they come in addition to kubeadm's
// node-role.kubernetes.io/control-plane:NoSchedule. Several calls add up.
// Default: no taints, but that control-plane taint when there are workers.
func WithNodeTaints(node int, taints ...string) Option {
	return func(c *config) error {
		var errs []error
		for _, s := range taints {
			t, err := parseTaint(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("node %d taint %q: %w", node, s, err))
				continue
			}
			if c.settings.nodeTaints == nil {
				c.settings.nodeTaints = map[int][]taint{}
			}
			c.settings.nodeTaints[node] = append(c.settings.nodeTaints[node], t)
		}
		return errors.Join(errs...)
	}
}

// WithNodeMounts mounts paths of the engine's host into a node container
// (0 the control plane, 1 to n the workers, n+1 on the other control
// planes of WithControlPlanes), as kind's extraMounts do.
// Both paths must be absolute; a container path may not be one kindtest
// mounts itself (/var, /tmp, /run, /lib/modules) or a system directory.
// With a local engine the host path must exist, checked before anything
// is created. With a remote engine (DOCKER_HOST=tcp://...) or from inside
// a container of the engine, the host path is on the engine's host and
// cannot be checked from here: the engine creates a missing one as an
// empty directory. Several calls add up. Default: none.
func WithNodeMounts(node int, mounts ...Mount) Option {
	return func(c *config) error {
		var errs []error
		for _, m := range mounts {
			if err := checkMount(m); err != nil {
				errs = append(errs, fmt.Errorf("node %d mount %s:%s: %w", node, m.HostPath, m.ContainerPath, err))
				continue
			}
			if c.settings.nodeMounts == nil {
				c.settings.nodeMounts = map[int][]Mount{}
			}
			m.HostPath, m.ContainerPath = path.Clean(m.HostPath), path.Clean(m.ContainerPath)
			c.settings.nodeMounts[node] = append(c.settings.nodeMounts[node], m)
		}
		return errors.Join(errs...)
	}
}

// WithPortMapping publishes nodePort of the control-plane node container
// on hostPort of the engine's host, on the address the API server is
// published on (127.0.0.1, or a remote engine's address). hostPort 0 lets
// the engine choose a free port; MappedAddr says which. Any node port may
// be mapped (a NodePort Service's, 30000-32767, or a hostNetwork pod's or
// an ingress controller's 80 or 443) except 6443, the API server's, which
// is published already. A node port may be mapped once, and a fixed host
// port used once. Default: only the API server is published.
func WithPortMapping(hostPort, nodePort int) Option {
	return func(c *config) error {
		c.portMappings = append(c.portMappings, portMapping{hostPort: hostPort, nodePort: nodePort})
		return nil
	}
}

// WithRegistry starts a container registry (the CNCF distribution
// registry, image RegistryImage) for the cluster, removed with it. Images
// pushed to RegistryAddr() from the engine's host (`docker push
// localhost:PORT/name:tag`) are pulled by every node under the same name,
// so a pod spec can say `image: localhost:PORT/name:tag`. Its storage is
// the container's own file system. Default: no registry.
func WithRegistry() Option {
	return func(c *config) error { c.registry = true; return nil }
}

// WithRegistryMirror makes every node's containerd pull images of the
// registry host (for example "docker.io", "registry.k8s.io" or
// "_default" for every registry) from endpoint first, an http:// or
// https:// URL, before the host itself. Several mirrors of one host are
// tried in the order given. The host is a registry name as it appears in
// image references, without a scheme. Default: no mirrors.
func WithRegistryMirror(host, endpoint string) Option {
	return func(c *config) error {
		c.mirrors = append(c.mirrors, registryMirror{host: host, endpoint: endpoint})
		return nil
	}
}

// WithoutDefaultCNI leaves the pod network to the test: kindtest writes no
// CNI configuration, adds no routes between nodes' pod ranges and no
// masquerading, so nodes come up NotReady and CoreDNS stays Pending until
// the test installs a CNI plugin (Calico, Cilium, a bridge configuration
// of its own...). The controller-manager then allocates each node's pod
// range (node.spec.podCIDR) from 10.244.0.0/16, as CNI plugins expect.
// Start and New return once the API server answers and every node is
// registered with its pod range, and say so; call
// (*Cluster).WaitReady after applying the CNI. The node image carries the
// standard CNI plugins in /usr/lib/cni. kindtest's NetworkPolicy agent
// (see WithoutNetworkPolicy) is not installed either: the CNI plugin brings
// its own enforcement, or none. Default: kindtest's own pod network, a
// bridge per node, ready before the nodes boot, with NetworkPolicy
// enforced.
func WithoutDefaultCNI() Option {
	return func(c *config) error { c.noDefaultCNI = true; return nil }
}

// WithoutStorage leaves out the default StorageClass and its provisioner,
// for tests that bring their own (a CSI driver, another default class).
// Default: every cluster has the StorageClass StorageClassName, marked as
// the default class, with volumes on the node under StorageRoot. With
// WithReuse, clusters with and without storage are told apart.
func WithoutStorage() Option {
	return func(c *config) error { c.withoutStorage = true; return nil }
}

// WithProxy sets the proxy the nodes' containerd and kubelet use, in
// place of the test process's HTTP_PROXY, HTTPS_PROXY and NO_PROXY (the
// default, as kind passes them on): "" for none. NO_PROXY always gets the
// cluster's own names and ranges besides noProxy. A value that is not a
// proxy URL is an error.
func WithProxy(httpProxy, httpsProxy, noProxy string) Option {
	return func(c *config) error {
		c.proxy = proxySettings{http: httpProxy, https: httpsProxy, no: noProxy}
		return nil
	}
}

// WithoutNetworkPolicy leaves out the NetworkPolicy agent: policies are
// accepted by the API server but not enforced, as on a cluster whose CNI
// plugin ignores them. Default: NetworkPolicy is enforced by
// kube-network-policies, a DaemonSet (NetworkPolicyDaemonSet) that Start
// applies without waiting for it. Under WithoutDefaultCNI the agent is
// never installed, with or without this option: the CNI plugin the test
// installs brings its own enforcement (or none). With WithReuse, clusters
// with and without the agent are told apart.
func WithoutNetworkPolicy() Option {
	return func(c *config) error { c.withoutNetworkPolicy = true; return nil }
}

// KubeProxyMode is how kube-proxy programs Services on the nodes.
type KubeProxyMode string

// The kube-proxy modes WithKubeProxyMode takes, as kind names them.
const (
	// KubeProxyIPTables is the default: iptables rules (through the
	// nf_tables backend of iptables-nft).
	KubeProxyIPTables KubeProxyMode = "iptables"
	// KubeProxyNFTables programs nftables directly (GA since
	// Kubernetes 1.33); it needs a kernel of 5.13 or later.
	KubeProxyNFTables KubeProxyMode = "nftables"
	// KubeProxyIPVS uses the kernel's IPVS load balancer, whose modules
	// (ip_vs, ip_vs_rr, ip_vs_wrr, ip_vs_sh) must be loaded on the engine's
	// host: a node container cannot load them. Without them creation
	// fails before boot, saying so.
	KubeProxyIPVS KubeProxyMode = "ipvs"
	// KubeProxyNone runs no kube-proxy, as kind's kubeProxyMode "none":
	// for a test that installs what replaces it (Cilium's or Calico's
	// eBPF Service handling, for example). Until then Services have
	// cluster IPs, DNS names and endpoints, but nothing routes to them,
	// node ports and LoadBalancer Services included. CoreDNS and
	// kindtest's add-ons reach the API server without a Service, so the
	// cluster is still ready.
	KubeProxyNone KubeProxyMode = "none"
)

// WithKubeProxyMode sets kube-proxy's mode: KubeProxyIPTables (the
// default), KubeProxyNFTables or KubeProxyIPVS, or KubeProxyNone for no
// kube-proxy at all. With WithReuse, clusters of different modes are told
// apart.
func WithKubeProxyMode(mode KubeProxyMode) Option {
	return func(c *config) error {
		switch mode {
		case KubeProxyIPTables:
			c.kubeProxyMode = "" // the default, the same shape
			return nil
		case KubeProxyNFTables, KubeProxyIPVS, KubeProxyNone:
			c.kubeProxyMode = mode
			return nil
		}
		return fmt.Errorf("kube-proxy mode %q: use %q, %q, %q or %q (no kube-proxy)", mode, KubeProxyIPTables, KubeProxyNFTables, KubeProxyIPVS, KubeProxyNone)
	}
}

// WithoutLoadBalancer leaves LoadBalancer Services without an address,
// as on a cluster with no cloud provider. Default: every Service of type
// LoadBalancer gets a load balancer, as cloud-provider-kind gives kind
// clusters: a container on the cluster's network (from
// LoadBalancerImage) that forwards each TCP port of the Service to its
// node port on every node, with the ports published on the host. The
// Service's status gets the container's address (ipMode Proxy), so Wait
// with HasAddress sees it; LoadBalancerAddr gives the address to dial
// from the test process, wherever it runs. The process that made the
// cluster runs the controller, which costs nothing at start and, while
// no Service is of type LoadBalancer, one list of Services a second,
// until the cluster is deleted or kept; a kept cluster's load balancers
// stay as they were. UDP ports and Services without node ports get none,
// and the log says so. With WithReuse, clusters with and without it are
// told apart.
func WithoutLoadBalancer() Option {
	return func(c *config) error { c.withoutLoadBalancer = true; return nil }
}

// loadBalancers says whether LoadBalancer Services get load balancers.
func (s shape) loadBalancers() bool { return s.kubernetes && !s.withoutLoadBalancer }

// WithPodSubnet sets the cluster's pod range: an IPv4 range of at least
// a /24 per node (each node gets the next /24 of it, the control plane
// the first), or with WithIPFamily(IPv6 or DualStack) an IPv6 range of at
// least a /64 per node, or one of each, comma-separated, as kind's
// podSubnet. A family not given keeps its default: 10.244.0.0/16, as
// kind's, and fd00:10:244::/56. Use it when the default overlaps a
// network the nodes or pods must reach. It must not overlap the Service
// range or the nodes' network (checked once that exists). With WithReuse,
// clusters of different ranges are told apart.
func WithPodSubnet(cidr string) Option {
	return subnetOption("pod subnet", cidr, [2]int{8, 24}, [2]int{32, 63}, defaultPodSubnet, defaultPodSubnet6, func(c *config) *string { return &c.pods })
}

// WithServiceSubnet sets the cluster's Service range: an IPv4 range from
// a /12 (the largest the API server takes) to a /28, or with
// WithIPFamily(IPv6 or DualStack) an IPv6 range from a /108 to a /124, or
// one of each, comma-separated. The API server's Service is its first
// address, the cluster DNS its tenth. A family not given keeps its
// default: 10.96.0.0/16, as kind's, and fd00:10:96::/112. With WithReuse,
// clusters of different ranges are told apart.
func WithServiceSubnet(cidr string) Option {
	return subnetOption("Service subnet", cidr, [2]int{12, 28}, [2]int{108, 124}, defaultServiceSubnet, defaultServiceSubnet6, func(c *config) *string { return &c.services })
}

// subnetOption sets the ranges field gives: one range, or one of each
// family, comma-separated, with the prefix lengths bounds4 or bounds6
// allow. It keeps them IPv4 first and leaves out a default spelled out,
// so that naming it is the same shape as leaving the option out.
func subnetOption(what, cidr string, bounds4, bounds6 [2]int, def4, def6 string, field func(*config) *string) Option {
	return func(c *config) error {
		var v4, v6 string
		for _, f := range strings.Split(cidr, ",") {
			p, err := parseSubnet(what, f, bounds4, bounds6)
			if err != nil {
				return err
			}
			is4 := netip.MustParsePrefix(p).Addr().Is4()
			if (is4 && v4 != "") || (!is4 && v6 != "") {
				return fmt.Errorf("%s %q: two %s ranges; give at most one of each family", what, cidr, familyName(netip.MustParsePrefix(p).Addr()))
			}
			if is4 {
				v4 = p
			} else {
				v6 = p
			}
		}
		var keep []string
		if v4 != "" && v4 != def4 {
			keep = append(keep, v4)
		}
		if v6 != "" && v6 != def6 {
			keep = append(keep, v6)
		}
		*field(c) = strings.Join(keep, ",")
		return nil
	}
}

// parseSubnet reads a range whose prefix length is within bounds4 (IPv4)
// or bounds6 (IPv6).
func parseSubnet(what, cidr string, bounds4, bounds6 [2]int) (string, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return "", fmt.Errorf("%s %q: not an IP range such as 10.100.0.0/16 or fd00:100::/56", what, cidr)
	}
	bounds := bounds4
	if p.Addr().Is6() {
		bounds = bounds6
	}
	switch {
	case p.Masked() != p:
		return "", fmt.Errorf("%s %q: has bits set past its /%d: did you mean %s?", what, cidr, p.Bits(), p.Masked())
	case p.Bits() < bounds[0] || p.Bits() > bounds[1]:
		return "", fmt.Errorf("%s %q: a /%d; use an %s range of a /%d to a /%d", what, cidr, p.Bits(), familyName(p.Addr()), bounds[0], bounds[1])
	case !p.Addr().IsPrivate() && !p.Addr().IsGlobalUnicast():
		return "", fmt.Errorf("%s %q: not a unicast range (loopback, link-local and multicast ranges cannot be routed to pods)", what, cidr)
	}
	return p.String(), nil
}

// validateSubnets checks the ranges against the cluster's families, each
// other and the node count, and the IP family against the options it
// cannot go with.
func (c *config) validateSubnets() []error {
	var errs []error
	for _, r := range []struct{ what, option, given string }{{"pod", "WithPodSubnet", c.pods}, {"Service", "WithServiceSubnet", c.services}} {
		for _, p := range splitPrefixes(r.given) {
			if (p.Addr().Is4() && !c.hasIPv4()) || (p.Addr().Is6() && !c.hasIPv6()) {
				errs = append(errs, fmt.Errorf("%s subnet %s: an %s range, but the cluster's IP family is %s: use WithIPFamily(DualStack) for both families, or drop the range from %s", r.what, p, familyName(p.Addr()), c.family(), r.option))
			}
		}
	}
	pods, services := c.podRanges(), c.serviceRanges()
	for i := range pods {
		if pods[i].Overlaps(services[i]) {
			errs = append(errs, fmt.Errorf("pod subnet %s and Service subnet %s overlap: give them ranges apart", pods[i], services[i]))
		}
		bits := perNodeBits(pods[i])
		if nodes := 1 + c.workers + c.controlPlanes - 1; c.kubernetes && !c.noDefaultCNI && bits-pods[i].Bits() < 31 && nodes > 1<<(bits-pods[i].Bits()) {
			errs = append(errs, fmt.Errorf("pod subnet %s: holds %d /%ds, one per node, for %d nodes: use a larger range", pods[i], 1<<(bits-pods[i].Bits()), bits, nodes))
		}
	}
	if (c.pods != "" || c.services != "") && !c.kubernetes {
		errs = append(errs, errors.New("pod and Service subnets are Kubernetes', which WithoutKubernetes leaves out: drop one of them"))
	}
	if c.ipFamily != "" && !c.kubernetes {
		errs = append(errs, fmt.Errorf("IP family %s: the families are Kubernetes', which WithoutKubernetes leaves out: drop one of them", c.ipFamily))
	}
	if c.family() == IPv6 && len(c.portMappings) > 0 {
		errs = append(errs, errors.New("WithPortMapping with WithIPFamily(IPv6): the engine publishes ports on the node's IPv4 address, where an IPv6-only cluster's node ports do not listen: use WithIPFamily(DualStack), or a LoadBalancer Service (LoadBalancerAddr) instead"))
	}
	return errs
}

// proxyMode is kube-proxy's mode, iptables when none was set.
func (s shape) proxyMode() KubeProxyMode {
	if s.kubeProxyMode == "" {
		return KubeProxyIPTables
	}
	return s.kubeProxyMode
}

// WithKindConfig takes the settings of a kind configuration file (kind.x-k8s.io/v1alpha4,
// kind: Cluster), for the part kindtest supports: nodes (with role
// control-plane or worker, in the order given; their labels and
// extraMounts, without selinuxRelabel or propagation; extraPortMappings of
// a single control plane, TCP, as WithPortMapping), featureGates and
// runtimeConfig. The control-plane nodes set the control-plane count as
// WithControlPlanes would (1, 3 or 5), the workers the worker count as
// WithWorkers would; nodes are indexed as those options index them, the
// first control plane being node 0 whatever its place in the list, the
// workers 1 to n in order, then the other control planes. No nodes is
// kind's default, one control plane. Every other field is an error
// naming the field and why: name, kubeadmConfigPatches(JSON6902),
// containerdConfigPatches(JSON6902), nodes[].image,
// nodes[].kubeadmConfigPatches, a port mapping's listenAddress, and every
// networking field but disableDefaultCNI (true is WithoutDefaultCNI),
// kubeProxyMode (iptables, nftables, ipvs or none, as WithKubeProxyMode), podSubnet and serviceSubnet (as WithPodSubnet and
// WithServiceSubnet) and ipFamily (ipv4, ipv6 or dual, as WithIPFamily).
// Options after it add to or override what it set. Default: none.
func WithKindConfig(data []byte) Option {
	return func(c *config) error {
		if err := applyKindConfig(c, data); err != nil {
			return fmt.Errorf("kind config: %w", err)
		}
		return nil
	}
}

// WithKindConfigFile is WithKindConfig with the file at path. Default: none.
func WithKindConfigFile(path string) Option {
	return func(c *config) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("kind config: %w", err)
		}
		if err := applyKindConfig(c, data); err != nil {
			return fmt.Errorf("kind config %s: %w", path, err)
		}
		return nil
	}
}

// The checks of validate that take more than a few lines.

// validateControlPlanes checks WithControlPlanes against the rest.
func (c *config) validateControlPlanes() []error {
	n := c.controlPlanes
	var errs []error
	switch {
	case n < 1:
		errs = append(errs, fmt.Errorf("control planes: %d: a cluster needs at least one; use 1, 3 or 5", n))
	case n > maxControlPlanes:
		errs = append(errs, fmt.Errorf("control planes: %d: at most %d are allowed (etcd advises 3 or 5 members; more slow every write); use 1, 3 or 5", n, maxControlPlanes))
	case n%2 == 0:
		errs = append(errs, fmt.Errorf("control planes: %d: an even count gains nothing: etcd needs a majority (%d of %d) to work, so %d control planes survive no more failures than %d do; use 1, 3 or 5", n, n/2+1, n, n, n-1))
	}
	if n > 1 && !c.kubernetes {
		errs = append(errs, fmt.Errorf("control planes: %d with WithoutKubernetes: without Kubernetes there is no control plane to replicate; leave WithControlPlanes out, or use WithWorkers for more nodes", n))
	}
	return errs
}

// validateSettings checks the settings against the rest of the
// configuration.
func (c *config) validateSettings() []error {
	s := &c.settings
	var errs []error
	checkNode := func(what string, node int) {
		last := c.workers + max(c.controlPlanes, 1) - 1
		switch {
		case node >= 0 && node <= last:
		case c.controlPlanes > 1:
			errs = append(errs, fmt.Errorf("%s on node %d: no such node: node 0 is the first control plane, 1 to %d the workers (WithWorkers(%d)), %d to %d the other control planes (WithControlPlanes(%d))", what, node, c.workers, c.workers, c.workers+1, last, c.controlPlanes))
		default:
			errs = append(errs, fmt.Errorf("%s on node %d: no such node: node 0 is the control plane, 1 to %d the workers (WithWorkers(%d))", what, node, c.workers, c.workers))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(s.nodeLabels)) {
		checkNode("labels", n)
	}
	for _, n := range slices.Sorted(maps.Keys(s.nodeTaints)) {
		checkNode("taints", n)
	}
	for _, n := range slices.Sorted(maps.Keys(s.nodeMounts)) {
		checkNode("mounts", n)
		seen := map[string]bool{}
		for _, m := range s.nodeMounts[n] {
			if seen[m.ContainerPath] {
				errs = append(errs, fmt.Errorf("mounts on node %d: %s is mounted twice", n, m.ContainerPath))
			}
			seen[m.ContainerPath] = true
		}
	}
	if !c.kubernetes {
		for what, set := range map[string]bool{
			"WithFeatureGates": len(s.featureGates) > 0, "WithRuntimeConfig": len(s.runtimeConfig) > 0,
			"WithComponentArgs": len(s.args) > 0, "WithKubeletConfig": len(s.kubeletConfig) > 0,
			"WithNodeLabels": len(s.nodeLabels) > 0, "WithNodeTaints": len(s.nodeTaints) > 0,
		} {
			if set {
				errs = append(errs, fmt.Errorf("%s: configures Kubernetes, which WithoutKubernetes leaves out", what))
			}
		}
	}
	// The default image carries the version the gate list was made from;
	// another image is checked once its version is known (checkVersion).
	if c.image == DefaultImage {
		errs = append(errs, s.checkFeatureGates()...)
	}
	return errs
}

// validatePortMappings checks each mapping and the set of them.
func validatePortMappings(ms []portMapping) []error {
	var errs []error
	nodePorts, hostPorts := map[int]bool{}, map[int]bool{}
	for _, m := range ms {
		what := fmt.Sprintf("port mapping %d:%d", m.hostPort, m.nodePort)
		ok := true
		if m.hostPort < 0 || m.hostPort > 65535 {
			errs = append(errs, fmt.Errorf("%s: host port %d is out of range: use 1-65535, or 0 to let the engine choose", what, m.hostPort))
			ok = false
		}
		if m.nodePort < 1 || m.nodePort > 65535 {
			errs = append(errs, fmt.Errorf("%s: node port %d is out of range 1-65535 (NodePort Services use 30000-32767)", what, m.nodePort))
			ok = false
		}
		if m.nodePort == apiServerPort {
			errs = append(errs, fmt.Errorf("%s: node port %d is the API server's, which is published already: use APIServer() or Kubeconfig()", what, m.nodePort))
			ok = false
		}
		if !ok {
			continue
		}
		if nodePorts[m.nodePort] {
			errs = append(errs, fmt.Errorf("%s: node port %d is mapped twice: map it once", what, m.nodePort))
		}
		nodePorts[m.nodePort] = true
		if m.hostPort != 0 {
			if hostPorts[m.hostPort] {
				errs = append(errs, fmt.Errorf("%s: host port %d is used twice: use another, or 0 to let the engine choose", what, m.hostPort))
			}
			hostPorts[m.hostPort] = true
		}
	}
	return errs
}

// validateRegistry checks the registry options.
func (c *config) validateRegistry() []error {
	var errs []error
	for _, m := range c.mirrors {
		switch {
		case m.host == "":
			errs = append(errs, fmt.Errorf("registry mirror for endpoint %q: empty host: name the registry it mirrors, such as \"docker.io\" (or \"_default\" for every registry)", m.endpoint))
		case m.host != "_default" && !registryHostPattern.MatchString(m.host):
			errs = append(errs, fmt.Errorf("registry mirror host %q: want a registry name as in image references, HOST or HOST:PORT without scheme or path, such as \"docker.io\"", m.host))
		}
		u, err := url.Parse(m.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("registry mirror endpoint %q for %q: want an http:// or https:// URL such as \"http://mirror.example.com:5000\"", m.endpoint, m.host))
		}
	}
	return errs
}

// networkPolicyEnforced tells whether a cluster of this configuration runs
// the agent.
func (c *config) networkPolicyEnforced() bool {
	return c.kubernetes && !c.noDefaultCNI && !c.withoutNetworkPolicy
}

// shapeVersion is the version of reuseHash's encoding of a shape. Raising
// it (when the encoding, or what a field means, changes) leaves every kept
// reusable cluster unmatched: they are made anew, and `kindtest prune
// -all` removes the old ones. There are no compatibility branches.
const shapeVersion = 4

// reuseHash identifies a reusable cluster: the hash of a canonical
// encoding of its shape, every field by name in declaration order (maps
// sorted by key, as fmt prints them), and of its node image by ID, so
// that a rebuilt image makes a new cluster.
func reuseHash(cfg *config, imageID string) string {
	h := sha256.New()
	fmt.Fprintf(h, "kindtest reuse shape v%d\nimage %s\n", shapeVersion, imageID)
	v := reflect.ValueOf(cfg.shape)
	for i := range v.NumField() {
		fmt.Fprintf(h, "%s %#v\n", v.Type().Field(i).Name, v.Field(i))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
