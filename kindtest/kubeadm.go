// kubeadm's configuration for the first control plane and for a joining
// node, rendered from the cluster and its settings.

package kindtest

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
)

// newBootstrapToken makes a kubeadm bootstrap token, [a-z0-9]{6}.[a-z0-9]{16}.
func newBootstrapToken() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:6]) + "." + string(b[6:])
}

// initParams are the values of the first control plane's kubeadm
// configuration that come from the cluster being made.
type initParams struct {
	cluster, version string
	cp               *Node
	// endpoint is the controlPlaneEndpoint's host when the cluster has
	// several control planes (the load balancer's address), "" for one
	// control plane, which is then its own endpoint.
	endpoint string
	token    string
	// singleNode: the control plane is the only node, so it runs workloads
	// (no control-plane taint).
	singleNode bool
	podRanges  podRanges
	timeout    time.Duration
	settings   *settings
	// extraSANs are more addresses the API server's certificate names: a
	// remote engine's address, where the API server is published, and the
	// load balancer's name and address.
	extraSANs []string
	// kubeProxyMode is kube-proxy's mode; "" is iptables.
	kubeProxyMode KubeProxyMode
	// podSubnet and serviceSubnet are the cluster's ranges, one per IP
	// family, comma-separated; "" is the IPv4 default.
	podSubnet, serviceSubnet string
	// rootless: the engine runs rootless, its nodes in a user namespace.
	rootless bool
	// patchesDir is the directory of kubeadm's patches for the static
	// pods (bootstrap.ShimGroupPatches); "" names none.
	patchesDir string
}

// podRanges says who gives each node its pod range.
type podRanges int

const (
	// podRangesFixed: kindtest fixes each node's range (see nodePodSubnet)
	// for its default pod network, and the controller-manager allocates
	// none.
	podRangesFixed podRanges = iota
	// podRangesAllocated: the controller-manager allocates the ranges,
	// which the test's own CNI plugin reads from the nodes
	// (WithoutDefaultCNI).
	podRangesAllocated
)

// kubeadmInitConfig is the control plane's kubeadm configuration: init,
// cluster, kubelet and kube-proxy documents, tuned for a throwaway test
// cluster (no image pulls, no disk-pressure evictions, no conntrack sysctls
// the node may not set), with the user's settings (see settings.go).
//
// kubeadm's own time limits (one minute for an API call, four for the
// control plane to come up) are set to the create timeout, so that on a
// slow or loaded machine the create timeout alone decides when to give up.
//
// The values come in an initParams.
func kubeadmInitConfig(p initParams) string {
	cp, s := p.cp, p.settings
	// One control plane: no lease to wait for before controllers start.
	leaderElect := []arg{{"leader-elect", "false"}}
	endpoint := p.endpoint
	if endpoint == "" {
		endpoint = cp.ip
	} else {
		// Several control planes: one controller-manager and one scheduler
		// at a time, chosen by lease, as in any HA cluster.
		leaderElect = nil
	}
	cmBase := append([]arg{{"allocate-node-cidrs", strconv.FormatBool(p.podRanges == podRangesAllocated)}}, leaderElect...)
	return bootstrap.InitConfig{
		ClusterName:          p.cluster,
		PatchesDir:           p.patchesDir,
		KubernetesVersion:    p.version,
		Token:                p.token,
		AdvertiseAddress:     cp.kubeIP(),
		APIServerPort:        apiServerPort,
		ControlPlaneEndpoint: endpoint,
		Node:                 nodeRegistration(cp, s, p.singleNode),
		Timeout:              p.timeout,
		CertSANs:             append(append(nonEmpty(cp.ip, cp.ip6), cp.name), p.extraSANs...),
		PodSubnet:            cmp.Or(p.podSubnet, defaultPodSubnet),
		ServiceSubnet:        cmp.Or(p.serviceSubnet, defaultServiceSubnet),
		DNSDomain:            dnsDomain,
		EtcdArgs: bootstrapArgs(s.componentArgs(Etcd, append(etcdElection(p.endpoint == ""),
			// The cluster lives as long as a test; losing it on a host crash is fine.
			arg{"unsafe-no-fsync", "true"})...)),
		APIServerArgs: bootstrapArgs(s.componentArgs(KubeAPIServer,
			// Reads and watches go to etcd, which holds a test's few objects:
			// no cache per resource to fill at start. One node was Ready 0.86
			// s sooner (p50 of 14 interleaved runs each, faster in 13 of 14
			// pairs), for the same memory at rest.
			arg{"watch-cache", "false"})),
		ServingCertDir: servingCertDir,
		ControllerManagerArgs: bootstrapArgs(s.componentArgs(KubeControllerManager, append(append(cmBase, servingArgs(KubeControllerManager)...),
			// At start each controller gets a service account and a token of its
			// own; the default client rate limit (20/s) made that take seconds.
			arg{"kube-api-qps", "500"},
			arg{"kube-api-burst", "1000"})...)),
		SchedulerArgs: bootstrapArgs(s.componentArgs(KubeScheduler, append(servingArgs(KubeScheduler), leaderElect...)...)),
		Kubelet:       kubeletConfig(cp, s, p.version),
		// A soft memory limit for the API server's Go runtime, in a
		// cluster that holds a test's few objects: its collector runs
		// more often near the limit instead of letting the heap double,
		// about 50 MiB less at rest. The controller-manager, the scheduler
		// and etcd have none: at 40 MiB their collectors ran dozens of
		// times through start-up, which cost 0.8 s to Ready on a busy
		// machine for a few MiB at rest (docs/performance.md).
		APIServerEnv:    memoryLimit("160MiB"),
		FeatureGates:    s.featureGates,
		KubeProxyMode:   kubeProxyConfigMode(p.kubeProxyMode),
		InUserNamespace: p.rootless,
	}.YAML()
}

// prebootLog is what the kubeadm init phases run before boot said.
const prebootLog = "/etc/kindtest/kubeadm-preboot.log"

// kubeadmJoinConfig is the kubeadm configuration of a worker, or of a
// control plane after the first, joining through the API server the
// discovery kubeconfig names (see kubeadmJoin).
func kubeadmJoinConfig(n *Node, version, token string, timeout time.Duration, s *settings) string {
	cfg := bootstrap.JoinConfig{
		DiscoveryFile: discoveryKubeconfigPath,
		APIServerPort: apiServerPort,
		Token:         token,
		Timeout:       timeout,
		Kubelet:       kubeletConfig(n, s, version),
	}
	untainted := false
	if n.role == RoleControlPlane {
		// Without workers, every control plane runs workloads.
		untainted = n.cluster != nil && n.cluster.cfg.workers == 0
		// The shared certificates were copied from the first control plane
		// beforehand (see joinControlPlane); kubeadm makes the rest.
		cfg.ControlPlaneAddress = n.kubeIP()
		// Its static pods share one containerd shim (the patches come
		// with the configuration, see kubeadmJoin).
		cfg.PatchesDir = bootstrap.KubeadmPatchesDir
	}
	cfg.Node = nodeRegistration(n, s, untainted)
	return cfg.YAML()
}

// nodeRegistration is node n's kubeadm nodeRegistration: its name, the
// kubelet's flags (its address, its labels: kindtest's node index and
// WithNodeLabels', WithComponentArgs' kubelet flags) and its taints.
func nodeRegistration(n *Node, s *settings, singleNode bool) bootstrap.NodeRegistration {
	labels := map[string]string{nodeIndexLabel: fmt.Sprint(n.index)}
	maps.Copy(labels, s.nodeLabels[n.index])
	kubeletArgs := s.componentArgs(Kubelet, arg{"node-ip", strings.Join(n.kubeIPs(), ",")}, arg{"node-labels", joinLabels(labels)})
	// feature-gates go into the KubeletConfiguration, not on the command line.
	kubeletArgs = slices.DeleteFunc(kubeletArgs, func(a arg) bool { return a.name == "feature-gates" })
	taints, untainted := s.taints(n, singleNode)
	return bootstrap.NodeRegistration{
		Name:        n.name,
		CRISocket:   criSocket,
		KubeletArgs: bootstrapArgs(kubeletArgs),
		Taints:      taints,
		Untainted:   untainted,
	}
}

// kubeletConfig is node n's kubelet configuration: kindtest's, merged
// with WithKubeletConfig's fields and WithFeatureGates' gates.
func kubeletConfig(n *Node, s *settings, version string) bootstrap.KubeletConfig {
	if version == "" {
		version = KubernetesVersion
	}
	return bootstrap.KubeletConfig{Version: version, CgroupV1: !n.cgroupV2, OOMScoreAdj: n.oomScoreAdj, Fields: s.kubeletConfig, FeatureGates: s.featureGates}
}

// nonEmpty is the strings of ss that are not "".
func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

// bootstrapArgs is args as bootstrap renders them.
func bootstrapArgs(args []arg) []bootstrap.Arg {
	out := make([]bootstrap.Arg, len(args))
	for i, a := range args {
		out[i] = bootstrap.Arg{Name: a.name, Value: a.value}
	}
	return out
}

// etcdElection is etcd's raft timing with one control plane (single):
// a lone member elects itself once its election timeout, less the ticks
// it fast-forwards, runs out, a random 0.1 to 1 s with etcd's defaults
// (100 ms heartbeat, 1 s timeout), and the API server waits for it. At
// 10 ms and 100 ms that is 10 to 100 ms: the API server served 0.47 s
// sooner and one node was Ready 0.38 s sooner (p50 of 10 interleaved
// runs each), for etcd's idle CPU going from 0.6 to 1% of a core.
// Several members keep etcd's defaults: on a busy machine a follower
// would call elections when a heartbeat is late.
func etcdElection(single bool) []arg {
	if !single {
		return nil
	}
	return []arg{{"heartbeat-interval", "10"}, {"election-timeout", "100"}}
}

// memoryLimit is the environment that sets a Go program's soft memory
// limit (GOMEMLIMIT).
func memoryLimit(limit string) []bootstrap.Arg {
	return []bootstrap.Arg{{Name: "GOMEMLIMIT", Value: limit}}
}

// kubeProxyConfigMode is the mode of kubeadm's KubeProxyConfiguration:
// "" leaves the document out, with no kube-proxy (KubeProxyNone, which
// is not a mode kube-proxy knows).
func kubeProxyConfigMode(m KubeProxyMode) string {
	m = shape{kubeProxyMode: m}.proxyMode()
	if m == KubeProxyNone {
		return ""
	}
	return string(m)
}

// The controller-manager and the scheduler serve /healthz and /metrics
// over TLS. Given no certificate, each makes a self-signed one at start,
// two 2048-bit RSA keys: 0.1 to 0.5 s of CPU on a busy 2-core machine,
// the scheduler's on the path to Ready (it starts once the API server is
// healthy), the controller-manager's while the API server starts. kindtest
// gives each an ECDSA certificate for localhost and 127.0.0.1 (what they
// would make), signed by a CA of its own that the certificate file also
// holds, written on every control plane before kubeadm makes their pods.
const servingCertDir = "/etc/kubernetes/serving"

// servingComponents are the components servingFiles makes certificates for.
var servingComponents = []Component{KubeControllerManager, KubeScheduler}

// servingPaths are where component's certificate and key are.
func servingPaths(component Component) (crt, key string) {
	base := path.Join(servingCertDir, string(component))
	return base + ".crt", base + ".key"
}

// servingArgs are the flags that point component at its certificate.
func servingArgs(component Component) []arg {
	crt, key := servingPaths(component)
	return []arg{{"tls-cert-file", crt}, {"tls-private-key-file", key}}
}

// servingFiles are the certificate (with its CA after it) and the key of
// each of servingComponents, valid for a year as theirs would be.
func servingFiles() ([]bootstrap.File, error) {
	var files []bootstrap.File
	for _, component := range servingComponents {
		caPEM, cert, err := servingCertificate("127.0.0.1", []string{"localhost"}, 365*24*time.Hour)
		if err != nil {
			return nil, fmt.Errorf("serving certificate of %s: %w", component, err)
		}
		key, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
		if err != nil {
			return nil, fmt.Errorf("serving certificate of %s: %w", component, err)
		}
		crtPath, keyPath := servingPaths(component)
		crt := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), caPEM...)
		files = append(files,
			bootstrap.File{Path: crtPath, Content: string(crt)},
			bootstrap.File{Path: keyPath, Content: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}))})
	}
	return files, nil
}
