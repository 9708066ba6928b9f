package kindtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// optionErr applies opts as New does and returns the joined error text.
func optionErr(t *testing.T, opts ...Option) string {
	t.Helper()
	_, err := newConfig(opts)
	if err == nil {
		return ""
	}
	return err.Error()
}

func wantErr(t *testing.T, got string, parts ...string) {
	t.Helper()
	if got == "" {
		t.Errorf("no error; want one saying %q", parts)
		return
	}
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("error lacks %q:\n%s", p, got)
		}
	}
}

func TestValidateFeatureGates(t *testing.T) {
	// Gate names are checked against this version's list only for the
	// default node image: a KINDTEST_IMAGE of the environment would turn
	// the checks off.
	t.Setenv(envImage, "")
	cfg, err := newConfig([]Option{WithFeatureGates(map[string]bool{"ContainerStopSignals": true}), WithFeatureGates(map[string]bool{"ContainerStopSignals": false, "AllAlpha": true})})
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.settings.featureGates; len(g) != 2 || g["ContainerStopSignals"] || !g["AllAlpha"] {
		t.Errorf("gates %v: later calls must add up and win", g)
	}
	wantErr(t, optionErr(t, WithFeatureGates(map[string]bool{"NoSuchGate": true})), "feature gate NoSuchGate: not a feature gate of Kubernetes "+featureGatesVersion)
	wantErr(t, optionErr(t, WithFeatureGates(map[string]bool{"containerstopsignals": true})), "did you mean ContainerStopSignals?")
	wantErr(t, optionErr(t, WithFeatureGates(map[string]bool{"Bad-Name": true, "x=y": true})), `feature gate "Bad-Name"`, `feature gate "x=y"`)
	// A gate locked to its default cannot be set against it.
	var locked string
	for name, spec := range knownFeatureGates {
		if spec.locked {
			locked = name
			break
		}
	}
	if locked == "" {
		t.Fatal("the generated list has no locked gate to test with")
	}
	wantErr(t, optionErr(t, WithFeatureGates(map[string]bool{locked: !knownFeatureGates[locked].enabled})), "feature gate "+locked, "locked to")
	if e := optionErr(t, WithFeatureGates(map[string]bool{locked: knownFeatureGates[locked].enabled})); e != "" {
		t.Errorf("a locked gate at its locked value: %s", e)
	}

	// Another image: names are checked once its version is known, and only
	// when the list is of that version.
	other := []Option{WithImage("example.com/node:v1.36.3"), WithFeatureGates(map[string]bool{"NoSuchGate": true})}
	cfg, err = newConfig(other)
	if err != nil {
		t.Fatalf("another image's gates are checked later, not here: %v", err)
	}
	if err := cfg.settings.checkVersion(cfg.image, "v1.36.3"); err != nil {
		t.Errorf("another version: %v", err)
	}
	if err := cfg.settings.checkVersion(cfg.image, featureGatesVersion); err == nil || !strings.Contains(err.Error(), "NoSuchGate") {
		t.Errorf("an image of the list's version: %v", err)
	}
}

func TestValidateRuntimeConfig(t *testing.T) {
	if e := optionErr(t, WithRuntimeConfig(map[string]string{"api/alpha": "true", "internal.apiserver.k8s.io/v1alpha1": "true", "batch/v1/jobs": "false", "v1": "true"})); e != "" {
		t.Error(e)
	}
	wantErr(t, optionErr(t, WithRuntimeConfig(map[string]string{"api alpha": "true", "a=b": "true", "": "true"})), `runtime config "api alpha"`, `runtime config "a=b"`, `runtime config ""`)
	wantErr(t, optionErr(t, WithRuntimeConfig(map[string]string{"api/alpha": "yes"})), `api/alpha="yes": the value is "true" or "false"`)
}

func TestValidateComponentArgs(t *testing.T) {
	cfg, err := newConfig([]Option{
		WithComponentArgs(KubeAPIServer, "--v=2", "audit-log-maxage=3"),
		WithComponentArgs(KubeAPIServer, "--v=4"),
		WithComponentArgs(KubeControllerManager, "--leader-elect=true"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.settings.args[KubeAPIServer]; len(got) != 2 || got[0] != (arg{"v", "4"}) || got[1] != (arg{"audit-log-maxage", "3"}) {
		t.Errorf("apiserver args %v: a flag given again replaces its value in place", got)
	}
	cm := cfg.settings.componentArgs(KubeControllerManager, arg{"leader-elect", "false"}, arg{"kube-api-qps", "500"})
	if len(cm) != 2 || cm[0] != (arg{"leader-elect", "true"}) {
		t.Errorf("controller-manager args %v: a tuned default is overridden", cm)
	}
	wantErr(t, optionErr(t, WithComponentArgs(KubeAPIServer, "--v", "-v=2", "---v=2", "--=x", "--V=2", "")),
		`"--v" is not a flag`, `"-v=2" is not a flag`, `"---v=2" is not a flag`, `"--=x" is not a flag`, `"--V=2" is not a flag`, `"" is not a flag`)
	wantErr(t, optionErr(t, WithComponentArgs("kube-proxy", "--v=2")), `unknown component "kube-proxy"`)
	wantErr(t, optionErr(t,
		WithComponentArgs(KubeAPIServer, "--feature-gates=A=true", "--runtime-config=api/all=true"),
		WithComponentArgs(KubeControllerManager, "--allocate-node-cidrs=true"),
		WithComponentArgs(Kubelet, "node-labels=a=b", "--register-with-taints=a:NoSchedule")),
		"kube-apiserver: --feature-gates is set by kindtest: use WithFeatureGates",
		"--runtime-config is set by kindtest: use WithRuntimeConfig",
		"--allocate-node-cidrs is set by kindtest: kindtest gives each node a fixed pod range",
		"kubelet: --node-labels is set by kindtest: use WithNodeLabels",
		"--register-with-taints is set by kindtest: use WithNodeTaints")
}

func TestValidateKubeletConfig(t *testing.T) {
	cfg, err := newConfig([]Option{
		WithKubeletConfig("maxPods: 50\nsystemReserved:\n  memory: 100Mi\n"),
		WithKubeletConfig(`{"systemReserved": {"cpu": "100m"}, "maxPods": 60}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := kubeletConfig(&Node{cgroupV2: true}, &cfg.settings, KubernetesVersion).YAML()
	for _, s := range []string{"maxPods: 60\n", "  cpu: 100m\n", "  memory: 100Mi\n", "cgroupDriver: systemd\n", "failSwapOn: false\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("merged kubelet config lacks %q:\n%s", s, out)
		}
	}
	wantErr(t, optionErr(t, WithKubeletConfig("maxpods: 5\ncgroupDriver: cgroupfs\nkind: X\nfeatureGates:\n  A: true\n")),
		"field maxpods: not a field of the KubeletConfiguration", "field cgroupDriver: set by kindtest", "field kind: set by kindtest", "field featureGates: set by kindtest: use WithFeatureGates")
	wantErr(t, optionErr(t, WithKubeletConfig("- a\n- b\n")), "kubelet config: not a YAML mapping")
	wantErr(t, optionErr(t, WithKubeletConfig("")), "kubelet config: empty")
}

// TestKubeletConfigImagePullPolicy: kindtest keeps loaded images usable
// (NeverVerify), and WithKubeletConfig can still choose another policy.
func TestKubeletConfigImagePullPolicy(t *testing.T) {
	if out := kubeletConfig(&Node{}, &settings{}, KubernetesVersion).YAML(); !strings.Contains(out, "imagePullCredentialsVerificationPolicy: NeverVerify\n") {
		t.Errorf("default kubelet config lacks NeverVerify:\n%s", out)
	}
	cfg, err := newConfig([]Option{WithKubeletConfig("imagePullCredentialsVerificationPolicy: AlwaysVerify\n")})
	if err != nil {
		t.Fatal(err)
	}
	if out := kubeletConfig(&Node{}, &cfg.settings, KubernetesVersion).YAML(); !strings.Contains(out, "imagePullCredentialsVerificationPolicy: AlwaysVerify\n") {
		t.Errorf("WithKubeletConfig's policy does not stand:\n%s", out)
	}
}

func TestValidateNodeLabelsAndTaints(t *testing.T) {
	if e := optionErr(t, WithWorkers(1),
		WithNodeLabels(0, map[string]string{"tier": "cp", "example.com/team": "a", "node.kubernetes.io/pool": "x", "topology.kubernetes.io/zone": "z", "empty": ""}),
		WithNodeTaints(1, "dedicated=x:NoSchedule", "gpu:PreferNoSchedule", "example.com/k=v:NoExecute")); e != "" {
		t.Error(e)
	}
	wantErr(t, optionErr(t,
		WithNodeLabels(0, map[string]string{"node-role.kubernetes.io/worker": "", "-bad": "x", "ok": "bad value", "kindtest.dev/node-index": "9"})),
		"the kubelet refuses labels in the kubernetes.io namespace", `key name "-bad"`, `value "bad value"`, "kindtest sets this label itself")
	wantErr(t, optionErr(t, WithNodeTaints(0, "novalue", "k=v:Sometimes", "bad key=v:NoSchedule", "=v:NoSchedule")),
		`taint "novalue": write key=value:Effect`, `effect "Sometimes"`, `key name "bad key"`, `key name ""`)
	// Nodes that do not exist.
	wantErr(t, optionErr(t, WithWorkers(1), WithNodeTaints(2, "a:NoSchedule"), WithNodeLabels(-1, map[string]string{"a": "b"}), WithNodeMounts(5, Mount{HostPath: "/tmp", ContainerPath: "/x"})),
		"taints on node 2: no such node: node 0 is the control plane, 1 to 1 the workers (WithWorkers(1))", "labels on node -1: no such node", "mounts on node 5: no such node")
}

func TestValidateNodeMounts(t *testing.T) {
	dir := t.TempDir()
	cfg, err := newConfig([]Option{WithNodeMounts(0, Mount{HostPath: dir + "/", ContainerPath: "/data/", ReadOnly: true}, Mount{HostPath: dir, ContainerPath: "/rw"})})
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.settings.binds(0); len(b) != 2 || b[0] != dir+":/data:ro" || b[1] != dir+":/rw" {
		t.Errorf("binds %v", b)
	}
	if err := cfg.settings.checkMountSources(); err != nil {
		t.Error(err)
	}
	wantErr(t, optionErr(t, WithNodeMounts(0, Mount{HostPath: "rel", ContainerPath: "/x"}, Mount{HostPath: "/a", ContainerPath: "x"},
		Mount{HostPath: "/a:b", ContainerPath: "/x"}, Mount{HostPath: "/a", ContainerPath: "/var"}, Mount{HostPath: "/a", ContainerPath: "/lib/modules/"})),
		`host path "rel" is not absolute`, `container path "x" is not absolute`, `host path "/a:b": ':' and ','`, "container path /var is one kindtest", "container path /lib/modules is one kindtest")
	wantErr(t, optionErr(t, WithNodeMounts(0, Mount{HostPath: "/a", ContainerPath: "/x"}, Mount{HostPath: "/b", ContainerPath: "/x/"})), "/x is mounted twice")
	cfg, err = newConfig([]Option{WithNodeMounts(0, Mount{HostPath: filepath.Join(dir, "missing"), ContainerPath: "/x"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.settings.checkMountSources(); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing:/x: host path") {
		t.Errorf("missing host path: %v", err)
	}
}

func TestValidateSettingsWithoutKubernetes(t *testing.T) {
	wantErr(t, optionErr(t, WithoutKubernetes(), WithFeatureGates(map[string]bool{"AllAlpha": true}), WithNodeLabels(0, map[string]string{"a": "b"})),
		"WithFeatureGates: configures Kubernetes, which WithoutKubernetes leaves out", "WithNodeLabels: configures Kubernetes")
	if e := optionErr(t, WithoutKubernetes(), WithNodeMounts(0, Mount{HostPath: "/tmp", ContainerPath: "/x"})); e != "" {
		t.Errorf("mounts need no Kubernetes: %s", e)
	}
}

// TestSettingsOptionErrorsTogether: every bad setting is reported in one
// error by New, before any engine is contacted.
func TestSettingsOptionErrorsTogether(t *testing.T) {
	// Gate names are checked against this version's list only for the
	// default node image: a KINDTEST_IMAGE of the environment would turn
	// the checks off.
	t.Setenv(envImage, "")
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock") // nothing can be created
	_, err := New(context.Background(),
		WithWorkers(1),
		WithFeatureGates(map[string]bool{"NoSuchGate": true}),
		WithRuntimeConfig(map[string]string{"api/alpha": "maybe"}),
		WithComponentArgs(Etcd, "-x"),
		WithKubeletConfig("nosuchfield: 1"),
		WithNodeTaints(3, "a:NoSchedule"),
		WithNodeLabels(0, map[string]string{"k8s.io/x": "y"}),
		WithNodeMounts(0, Mount{HostPath: "rel", ContainerPath: "/x"}),
		WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nname: x\n")),
	)
	if err == nil {
		t.Fatal("no error")
	}
	wantErr(t, err.Error(), "kindtest: invalid options", "NoSuchGate", "api/alpha", `"-x" is not a flag`, "nosuchfield", "taints on node 3", "k8s.io namespace", `"rel" is not absolute`, "field name is not supported")
	if errors.Is(err, ErrDockerUnavailable) {
		t.Errorf("the engine was contacted: %v", err)
	}
}

func TestKindConfigOption(t *testing.T) {
	// Gate names are checked against this version's list only for the
	// default node image: a KINDTEST_IMAGE of the environment would turn
	// the checks off.
	t.Setenv(envImage, "")
	dir := t.TempDir()
	cfg, err := newConfig([]Option{WithKindConfig([]byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
featureGates:
  ContainerStopSignals: true
runtimeConfig:
  api/alpha: "true"
networking:
  podSubnet: 10.244.0.0/16
  kubeProxyMode: iptables
nodes:
- role: worker
  labels:
    tier: a
- role: control-plane
  extraMounts:
  - hostPath: ` + dir + `
    containerPath: /data
    readOnly: true
- role: worker
  labels:
    tier: b
`)), WithNodeTaints(2, "x:NoSchedule")})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.settings
	if cfg.workers != 2 || !s.featureGates["ContainerStopSignals"] || s.runtimeConfig["api/alpha"] != "true" ||
		s.nodeLabels[1]["tier"] != "a" || s.nodeLabels[2]["tier"] != "b" || len(s.nodeMounts[0]) != 1 || !s.nodeMounts[0][0].ReadOnly || len(s.nodeTaints[2]) != 1 {
		t.Errorf("kind config read as workers=%d %+v", cfg.workers, s)
	}
	// An empty node list is kind's default: one control plane.
	cfg, err = newConfig([]Option{WithWorkers(3), WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"))})
	if err != nil || cfg.workers != 0 {
		t.Errorf("no nodes: workers %v, %v", cfg, err)
	}

	wantErr(t, optionErr(t, WithKindConfig([]byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: mine
kubeadmConfigPatches:
- "x"
containerdConfigPatches: ["y"]
foo: 1
networking:
  podSubnet: 10.0.0.0/8
  apiServerPort: 6443
  disableDefaultCNI: maybe
  bar: 2
nodes:
- role: control-plane
  image: kindest/node:v1.30.0
  extraPortMappings: []
  kubeadmConfigPatches: []
  baz: 3
`))),
		"field name is not supported by kindtest: kindtest names clusters itself: use WithNamePrefix",
		"field kubeadmConfigPatches is not supported by kindtest",
		"field containerdConfigPatches is not supported",
		"field foo: not a field of kind's v1alpha4 Cluster",
		"pod subnet 10.0.0.0/8 and Service subnet 10.96.0.0/16 overlap",
		"field networking.apiServerPort is not supported",
		"field networking.bar: not a field",
		"field networking.disableDefaultCNI: maybe is not true or false",
		"field nodes[0].image is not supported by kindtest: every node runs the cluster's node image: use WithImage",
		"field nodes[0].kubeadmConfigPatches is not supported",
		"field nodes[0].baz: not a field",
		"kindtest supports nodes[].role, nodes[].labels, nodes[].extraMounts, nodes[].extraPortMappings (control plane, TCP), featureGates, runtimeConfig")
	wantErr(t, optionErr(t, WithKindConfig([]byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  extraPortMappings:
  - {containerPort: 30080, hostPort: 8080, listenAddress: 0.0.0.0}
  - {containerPort: 30081, protocol: UDP}
- role: worker
  extraPortMappings:
  - {containerPort: 30080}
`))),
		"nodes[0].extraPortMappings[0].listenAddress is not supported", `nodes[0].extraPortMappings[1].protocol "UDP"`,
		"nodes[1].extraPortMappings: kindtest publishes ports of the first control-plane node only")
	// The ranges, as WithPodSubnet and WithServiceSubnet.
	cfg, err = newConfig([]Option{WithWorkers(2), WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  podSubnet: 10.123.0.0/22\n  serviceSubnet: 10.124.0.0/20\n"))})
	if err != nil || cfg.podSubnet() != "10.123.0.0/22" || cfg.serviceSubnet() != "10.124.0.0/20" || cfg.nodePodSubnets(2)[0] != "10.123.2.0/24" {
		t.Errorf("kind podSubnet, serviceSubnet: %v", err)
	}
	if cfg, err := newConfig([]Option{WithPodSubnet("10.244.0.0/16"), WithServiceSubnet("10.96.0.0/16")}); err != nil || cfg.pods != "" || cfg.services != "" {
		t.Errorf("the default ranges spelled out must be the default shape: %+v %v", cfg, err)
	}
	if got := (shape{pods: "10.20.254.0/23"}).nodePodSubnets(1); len(got) != 1 || got[0] != "10.20.255.0/24" {
		t.Errorf("node 1 of 10.20.254.0/23: %s", got)
	}
	wantErr(t, optionErr(t, WithPodSubnet("10.1.0.0/25"), WithServiceSubnet("fd00::/100"), WithPodSubnet("10.1.2.3/16"), WithServiceSubnet("10.0.0.0/8"), WithPodSubnet("127.0.0.0/16"), WithPodSubnet("banana")),
		`pod subnet "10.1.0.0/25": a /25; use an IPv4 range of a /8 to a /24`,
		`Service subnet "fd00::/100": a /100; use an IPv6 range of a /108 to a /124`,
		`pod subnet "10.1.2.3/16": has bits set past its /16: did you mean 10.1.0.0/16?`,
		`Service subnet "10.0.0.0/8": a /8; use an IPv4 range of a /12 to a /28`,
		`pod subnet "127.0.0.0/16": not a unicast range`,
		`pod subnet "banana": not an IP range`)
	wantErr(t, optionErr(t, WithPodSubnet("10.1.0.0/23"), WithWorkers(2)), "pod subnet 10.1.0.0/23: holds 2 /24s, one per node, for 3 nodes")
	wantErr(t, optionErr(t, WithPodSubnet("10.1.0.0/16"), WithServiceSubnet("10.1.128.0/20")), "pod subnet 10.1.0.0/16 and Service subnet 10.1.128.0/20 overlap")
	wantErr(t, optionErr(t, WithoutKubernetes(), WithServiceSubnet("10.1.128.0/20")), "WithoutKubernetes leaves out")
	// kube-proxy's mode, as WithKubeProxyMode; kind's none is one.
	for _, mode := range []KubeProxyMode{KubeProxyNFTables, KubeProxyNone} {
		if cfg, err := newConfig([]Option{WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  kubeProxyMode: " + string(mode) + "\n"))}); err != nil || cfg.proxyMode() != mode {
			t.Errorf("kind kubeProxyMode %s: %v", mode, err)
		}
	}
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  kubeProxyMode: userspace\n"))),
		`field networking.kubeProxyMode: kube-proxy mode "userspace": use "iptables", "nftables", "ipvs" or "none" (no kube-proxy)`)
	wantErr(t, optionErr(t, WithKubeProxyMode("IPVS")), `kube-proxy mode "IPVS": use`)
	if _, err := newConfig([]Option{WithoutKubernetes(), WithKubeProxyMode(KubeProxyIPVS)}); err == nil || !strings.Contains(err.Error(), "kube-proxy is part of Kubernetes") {
		t.Errorf("kube-proxy mode without Kubernetes: %v", err)
	}
	for mode, name := range map[KubeProxyMode]string{"": "iptables", KubeProxyNFTables: "nftables", KubeProxyIPVS: "ipvs"} {
		cp := &Node{name: "c-control-plane", ip: "172.18.0.2", role: RoleControlPlane}
		got := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", timeout: time.Minute, settings: &settings{}, kubeProxyMode: mode})
		for _, want := range []string{"\nmode: " + name + "\n", "\n" + name + ":\n  minSyncPeriod: 1s\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("kube-proxy mode %q: the configuration lacks %q:\n%s", mode, want, got)
			}
		}
	}
	// No kube-proxy: no KubeProxyConfiguration for kubeadm to check
	// ("none" is no mode of kube-proxy's), the other documents as ever.
	cp := &Node{name: "c-control-plane", ip: "172.18.0.2", role: RoleControlPlane}
	got := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", timeout: time.Minute, settings: &settings{}, kubeProxyMode: KubeProxyNone})
	if strings.Contains(got, "KubeProxyConfiguration") || strings.Contains(got, "none") || !strings.Contains(got, "kind: KubeletConfiguration") || strings.HasSuffix(strings.TrimSpace(got), "---") {
		t.Errorf("kube-proxy mode none: the configuration:\n%s", got)
	}
	if cfg, err := newConfig([]Option{WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  disableDefaultCNI: true\n"))}); err != nil || !cfg.noDefaultCNI {
		t.Errorf("kind disableDefaultCNI: true is not WithoutDefaultCNI: %v", err)
	}
	if _, err := newConfig([]Option{WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  extraPortMappings:\n  - containerPort: 6443\n"))}); err == nil || !strings.Contains(err.Error(), "6443") {
		t.Errorf("kind extraPortMappings onto the API server's port: %v", err)
	}
	cfg, err = newConfig([]Option{WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  extraPortMappings:\n  - containerPort: 30080\n    hostPort: 8080\n    protocol: TCP\n"))})
	if err != nil || len(cfg.portMappings) != 1 || cfg.portMappings[0] != (portMapping{hostPort: 8080, nodePort: 30080}) {
		t.Errorf("kind extraPortMappings: %+v, %v", cfg, err)
	}
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: infra\n"))),
		`nodes[1].role "infra"`)
	// The control-plane count is WithControlPlanes', judged by its checks.
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: control-plane\n"))),
		"control planes: 2: an even count gains nothing")
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: worker\n"))),
		"control planes: 0: a cluster needs at least one")
	wantErr(t, optionErr(t, WithoutKubernetes(), WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: control-plane\n- role: control-plane\n"))),
		"control planes: 3 with WithoutKubernetes")
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: control-plane\n  extraPortMappings:\n  - containerPort: 30080\n- role: control-plane\n"))),
		"nodes[1].extraPortMappings: kindtest publishes ports of the first control-plane node only")
	// Three control planes: nodes indexed as WithControlPlanes indexes
	// them, the first control plane 0, the workers next, then the others.
	cfg, err = newConfig([]Option{WithKindConfig([]byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  labels: {cp: a}
  extraPortMappings:
  - containerPort: 30080
- role: worker
  labels: {w: a}
- role: control-plane
  labels: {cp: b}
- role: control-plane
  labels: {cp: c}
`))})
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.settings.nodeLabels; cfg.controlPlanes != 3 || cfg.workers != 1 || l[0]["cp"] != "a" || l[1]["w"] != "a" || l[2]["cp"] != "b" || l[3]["cp"] != "c" || len(cfg.portMappings) != 1 {
		t.Errorf("kind config of 3 control planes read as %d control planes, %d workers, labels %v, port mappings %v", cfg.controlPlanes, cfg.workers, l, cfg.portMappings)
	}
	// The same as WithControlPlanes(3) with WithWorkers(1).
	if want, err := newConfig([]Option{WithControlPlanes(3), WithWorkers(1)}); err != nil || want.controlPlanes != cfg.controlPlanes || want.workers != cfg.workers {
		t.Errorf("WithControlPlanes(3), WithWorkers(1): %+v, %v", want, err)
	}
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha3\n"))), "want kind: Cluster, apiVersion: kind.x-k8s.io/v1alpha4")
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  extraMounts:\n  - hostPath: /a\n    containerPath: /b\n    propagation: Bidirectional\n    selinuxRelabel: true\n"))),
		"extraMounts[0].selinuxRelabel is not supported", `extraMounts[0].propagation "Bidirectional" is not supported`)
	wantErr(t, optionErr(t, WithKindConfig([]byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nfeatureGates:\n  NoSuchGate: true\nnodes:\n- role: control-plane\n  labels:\n    kubernetes.io/foo: x\n"))),
		"NoSuchGate", "the kubelet refuses labels")
	wantErr(t, optionErr(t, WithKindConfig([]byte(":"))), "kind config: not YAML")

	file := filepath.Join(dir, "kind.yaml")
	if err := os.WriteFile(file, []byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: worker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := newConfig([]Option{WithKindConfigFile(file)}); err != nil || cfg.workers != 1 {
		t.Errorf("kind config file: %v", err)
	}
	wantErr(t, optionErr(t, WithKindConfigFile(filepath.Join(dir, "none.yaml"))), "kind config: open", "none.yaml")
}

func TestReuseHashCoversSettings(t *testing.T) {
	plain, _ := newConfig(nil)
	gated, _ := newConfig([]Option{WithFeatureGates(map[string]bool{"ContainerStopSignals": true})})
	labelled, _ := newConfig([]Option{WithNodeLabels(0, map[string]string{"a": "b"})})
	h := map[string]bool{reuseHash(plain, "img"): true, reuseHash(gated, "img"): true, reuseHash(labelled, "img"): true}
	if len(h) != 3 {
		t.Error("clusters with other settings share a reuse hash")
	}
	again, _ := newConfig([]Option{WithFeatureGates(map[string]bool{"ContainerStopSignals": true})})
	if reuseHash(gated, "img") != reuseHash(again, "img") {
		t.Error("the same settings hash differently")
	}
}

// TestFeatureGateListIsCurrent runs the generator on the Kubernetes
// source the node image is built from and compares its output with the
// committed list: regenerate with `go generate ./kindtest` when it fails.
func TestFeatureGateListIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles part of Kubernetes")
	}
	want, err := os.ReadFile("featuregates_generated.go")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "-C", "../images/kubernetes", "-trimpath", "./featuregates")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("generator: %v\n%s", err, stderr.String())
	}
	if string(got) != string(want) {
		t.Fatal("featuregates_generated.go is not the generator's output for the nested module's Kubernetes: run `go generate ./kindtest`")
	}
	if !strings.Contains(string(want), `featureGatesVersion = "`+KubernetesVersion+`"`) {
		t.Errorf("the list is not of KubernetesVersion %s", KubernetesVersion)
	}
}

// TestGateProbe runs the probe that checks gates on a node image of
// another Kubernetes version with the kubelet the node image build left
// on the host (the node's own), when there is one.
func TestGateProbe(t *testing.T) {
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	kubelet := filepath.Join(dir, "kindtest", "bin", KubernetesVersion, "kubelet")
	if _, err := os.Stat(kubelet); err != nil {
		t.Skipf("no kubelet built on this host: %v", err)
	}
	for gates, want := range map[string]string{"ContainerStopSignals": "", "NoSuchGate": "unrecognized feature gate: NoSuchGate"} {
		cmd := gateProbe(map[string]bool{gates: true})
		out, _ := exec.Command(kubelet, cmd[1:]...).CombinedOutput()
		err := gateProbeVerdict(string(out))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", gates, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", gates, err, want)
		}
	}
}
