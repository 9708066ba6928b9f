package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name (rewritten with -update-golden
// after a deliberate change: read the diff).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the rendered output (run with -update-golden after a deliberate change):\n%s", file, got)
	}
}

// yamlDocs decodes every document of s.
func yamlDocs(t *testing.T, s string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(s))
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("document %d is not YAML: %v\n%s", len(docs), err, s)
		}
		docs = append(docs, doc)
	}
}

func TestKubeletConfigGolden(t *testing.T) {
	k := KubeletConfig{
		CgroupV1: true,
		Fields: map[string]any{
			"maxPods":        50,
			"evictionHard":   map[string]any{"memory.available": "1Mi"},
			"systemReserved": map[string]any{"cpu": "100m", "memory": "100Mi"},
		},
		FeatureGates: map[string]bool{"ContainerStopSignals": true, "APIServerIdentity": false},
	}
	got := k.YAML()
	golden(t, "kubelet.golden", []byte(got))
	if docs := yamlDocs(t, got); len(docs) != 1 || docs[0]["kind"] != "KubeletConfiguration" {
		t.Errorf("not one KubeletConfiguration:\n%s", got)
	}
	// Merging copies: the caller's fields are left as they were.
	if len(k.Fields["evictionHard"].(map[string]any)) != 1 {
		t.Errorf("the caller's fields were changed: %v", k.Fields)
	}
	v2 := KubeletConfig{}.YAML()
	if strings.Contains(v2, "failCgroupV1") || strings.Contains(v2, "featureGates") || !strings.Contains(v2, "cgroupDriver: systemd\n") {
		t.Errorf("cgroup v2 default: want the systemd driver, no failCgroupV1 and no gates:\n%s", v2)
	}
}

// TestKubeletImagePullPolicy: images on the node stay usable without pull
// credentials where the kubelet checks them (KubeletEnsureSecretPulledImages
// on), the field is left out where the kubelet would refuse it, and a
// user's own policy wins.
func TestKubeletOOMScoreAdj(t *testing.T) {
	for out, want := range map[string]int{
		"":                                    -1,
		"kindtest: kubelet oom-score-adj 0\n": 0,
		"x\nkindtest: kubelet oom-score-adj 200\ny": 200,
		"kindtest: kubelet oom-score-adj -5":        -5,
		"kindtest: kubelet oom-score-adj ?\n":       -1,
	} {
		got, ok := KubeletOOMScoreAdj(out)
		if want == -1 && ok || want != -1 && (!ok || got != want) {
			t.Errorf("KubeletOOMScoreAdj(%q) = %d, %v; want %d", out, got, ok, want)
		}
	}
	zero := 0
	if y := (KubeletConfig{OOMScoreAdj: &zero}).YAML(); !strings.Contains(y, "oomScoreAdj: 0\n") {
		t.Errorf("OOMScoreAdj 0 not rendered:\n%s", y)
	}
	if y := (KubeletConfig{}).YAML(); strings.Contains(y, "oomScoreAdj") {
		t.Errorf("no OOMScoreAdj: kubeadm's default must stand:\n%s", y)
	}
	// WithKubeletConfig's own value wins.
	if y := (KubeletConfig{OOMScoreAdj: &zero, Fields: map[string]any{"oomScoreAdj": 5}}).YAML(); !strings.Contains(y, "oomScoreAdj: 5\n") {
		t.Errorf("the user's oomScoreAdj lost:\n%s", y)
	}
}

func TestKubeletImagePullPolicy(t *testing.T) {
	const field = "imagePullCredentialsVerificationPolicy"
	for _, tc := range []struct {
		name string
		k    KubeletConfig
		want any // nil: no such field
	}{
		{"current", KubeletConfig{}, "NeverVerify"},
		{"1.37", KubeletConfig{Version: "v1.37.2"}, "NeverVerify"},
		{"1.35, gate beta", KubeletConfig{Version: "v1.35.0"}, "NeverVerify"},
		{"1.34, gate alpha", KubeletConfig{Version: "v1.34.3"}, nil},
		{"1.34, gate turned on", KubeletConfig{Version: "v1.34.3", FeatureGates: map[string]bool{secretPulledImagesGate: true}}, "NeverVerify"},
		{"gate turned off", KubeletConfig{Version: "v1.37.2", FeatureGates: map[string]bool{secretPulledImagesGate: false}}, nil},
		{"user's policy", KubeletConfig{Version: "v1.37.2", Fields: map[string]any{
			field:                                  "NeverVerifyAllowlistedImages",
			"preloadedImagesVerificationAllowlist": []any{"docker.io/heldout/*"},
		}}, "NeverVerifyAllowlistedImages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := yamlDocs(t, tc.k.YAML())
			got, ok := docs[0][field]
			if tc.want == nil {
				if ok {
					t.Errorf("%s: %v, want none (the kubelet refuses it without its gate)", field, got)
				}
				return
			}
			if got != tc.want {
				t.Errorf("%s: %v, want %v", field, got, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	dst := map[string]any{"a": map[string]any{"x": 1, "y": 2}, "b": 1}
	src := map[string]any{"a": map[string]any{"y": 3}, "b": map[string]any{"z": 4}, "c": []any{1}}
	Merge(dst, src)
	want := map[string]any{"a": map[string]any{"x": 1, "y": 3}, "b": map[string]any{"z": 4}, "c": []any{1}}
	got, _ := json.Marshal(dst)
	if w, _ := json.Marshal(want); !bytes.Equal(got, w) {
		t.Errorf("merged %s, want %s", got, w)
	}
	src["b"].(map[string]any)["z"] = 5
	if dst["b"].(map[string]any)["z"] != 4 {
		t.Error("a mapping of src is shared with dst")
	}
}

func TestCNIConfigGolden(t *testing.T) {
	golden(t, "cni-dual.golden", CNIConfig("10.244.3.0/24", "fd00:10:244:3::/64"))
	got := CNIConfig("10.244.3.0/24")
	golden(t, "cni.golden", got)
	var list struct {
		CNIVersion string
		Plugins    []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(got, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Plugins) != 2 || list.Plugins[0].Type != "bridge" || list.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.3.0/24" || list.Plugins[1].Type != "portmap" {
		t.Errorf("want a bridge on 10.244.3.0/24, then portmap:\n%s", got)
	}
}

// testdata/coredns-kubeadm.yaml is what `kubeadm init phase addon coredns
// --print-manifest` prints for kindtest's cluster (Kubernetes v1.37.2).
func TestFitCoreDNSGolden(t *testing.T) {
	printed, err := os.ReadFile("testdata/coredns-kubeadm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := FitCoreDNS(string(printed), 1, "172.18.0.2", 6443)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "coredns.golden", []byte(got))

	docs := yamlDocs(t, got)
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d["kind"].(string))
	}
	if want := []string{"ConfigMap", "Service", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Deployment"}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v: the Deployment after the service account", kinds, want)
	}
	var dep struct {
		Spec struct {
			Replicas int
			Template struct {
				Spec struct {
					Containers []struct {
						Env            []struct{ Name, Value string }
						ReadinessProbe struct {
							PeriodSeconds int                   `yaml:"periodSeconds"`
							HTTPGet       struct{ Path string } `yaml:"httpGet"`
						} `yaml:"readinessProbe"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(got[strings.LastIndex(got, "---\n"):]), &dep); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if dep.Spec.Replicas != 1 || c.ReadinessProbe.PeriodSeconds != 1 || c.ReadinessProbe.HTTPGet.Path != "/ready" {
		t.Errorf("replicas %d, probe period %d, probe path %q: want 1, 1, /ready", dep.Spec.Replicas, c.ReadinessProbe.PeriodSeconds, c.ReadinessProbe.HTTPGet.Path)
	}
	if want := []struct{ Name, Value string }{{"KUBERNETES_SERVICE_HOST", "172.18.0.2"}, {"KUBERNETES_SERVICE_PORT", "6443"}}; !slices.Equal(c.Env, want) {
		t.Errorf("env %v, want %v", c.Env, want)
	}
}

func TestFitCoreDNSEdits(t *testing.T) {
	// A container that has env and a probe period already: they are
	// extended and set, not written twice.
	printed := `apiVersion: apps/v1
kind: Deployment
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: coredns
        env:
        - name: A
          value: b
        readinessProbe:
          periodSeconds: 10
`
	got, err := FitCoreDNS(printed, 2, "10.0.0.1", 443)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  replicas: 2\n", "- name: A\n", "- name: KUBERNETES_SERVICE_HOST\n", "value: \"443\"\n", "periodSeconds: 1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "env:") != 1 || strings.Count(got, "periodSeconds") != 1 {
		t.Errorf("env or periodSeconds written twice:\n%s", got)
	}
	for _, bad := range []string{
		strings.ReplaceAll(printed, "readinessProbe", "livenessProbe"),
		"apiVersion: v1\nkind: ServiceAccount\n",
		"kind: Deployment\nspec: [\n",
	} {
		if _, err := FitCoreDNS(bad, 1, "h", 1); err == nil {
			t.Errorf("no error for:\n%s", bad)
		}
	}
}

func TestCommands(t *testing.T) {
	// SHELL -c SCRIPT NAME ARGS...
	check := func(cmd []string, name string, args ...string) {
		t.Helper()
		if len(cmd) < 4 || cmd[1] != "-c" || !strings.HasPrefix(cmd[2], "#!/bin/"+cmd[0]+"\n") || cmd[3] != name || !slices.Equal(cmd[4:], args) {
			t.Errorf("command %q: want SHELL -c <%s> %s %q", cmd, name, name, args)
		}
	}
	check(ProvisionCommand(""), "provision.sh")
	check(ProvisionCommand("0123abcd"), "provision.sh", "0123abcd")
	check(NodeNetworkCommand(NodeNetwork{}), "node-network.sh")
	check(NodeNetworkCommand(NodeNetwork{PodSubnets: []string{"10.244.1.0/24"}, ClusterPodSubnets: []string{"10.244.0.0/16"}, BridgeNetfilter: true,
		Routes: []Route{{"10.244.0.0/24", "172.18.0.2"}, {"10.244.2.0/24", "172.18.0.4"}}}),
		"node-network.sh", string(CNIConfig("10.244.1.0/24")), "on", "masquerade", "10.244.1.0/24", "10.244.0.0/16",
		"route", "10.244.0.0/24", "172.18.0.2", "route", "10.244.2.0/24", "172.18.0.4")
	check(NodeNetworkCommand(NodeNetwork{PodSubnets: []string{"10.244.0.0/24"}, ClusterPodSubnets: []string{"10.244.0.0/16"}}),
		"node-network.sh", string(CNIConfig("10.244.0.0/24")), "off", "masquerade", "10.244.0.0/24", "10.244.0.0/16")
	// Dual-stack: a masquerade and a route per family, IPv4 first.
	check(NodeNetworkCommand(NodeNetwork{PodSubnets: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, ClusterPodSubnets: []string{"10.244.0.0/16", "fd00:10:244::/56"},
		Routes: []Route{{"10.244.0.0/24", "172.18.0.2"}, {"fd00:10:244::/64", "fd01::2"}}}),
		"node-network.sh", string(CNIConfig("10.244.1.0/24", "fd00:10:244:1::/64")), "off",
		"masquerade", "10.244.1.0/24", "10.244.0.0/16", "masquerade", "fd00:10:244:1::/64", "fd00:10:244::/56",
		"route", "10.244.0.0/24", "172.18.0.2", "route", "fd00:10:244::/64", "fd01::2")
	pre := Preboot{Config: "/c.yaml", AddonConfig: "/a.yaml", Log: "/p.log", Files: []File{{"/c.yaml", "abc"}, {"/m.yaml", "de"}}, Addons: []string{"coredns"}, Print: []string{"/a.conf"}}
	check(pre.Command(), "kubeadm-preboot.sh", "/c.yaml", "/a.yaml", "/p.log", SchedulerManifest, HeldSchedulerManifest, "/c.yaml", "3", "/m.yaml", "2", "--", "coredns", "--", "/a.conf", "--",
		"certs all", "kubeconfig all", "etcd local", "control-plane all", "kubelet-start")
	join := KubeadmJoin{Config: "/c.yaml", Log: "/j.log", Files: []File{{"/c.yaml", "abc"}, {"/d.conf", "de"}}}
	check(join.Command(), "kubeadm-join.sh", "/c.yaml", "/j.log", "/c.yaml", "3", "/d.conf", "2")
	if join.Input() != "abcde" {
		t.Errorf("join input %q", join.Input())
	}
	if pre.Input() != "abcde" {
		t.Errorf("preboot input %q", pre.Input())
	}
	check(KubeadmInitCommand(KubeadmInit{Config: "/c.yaml", Log: "/i.log", APIServerPort: 6443, Wrapper: []string{"timeout", "3"}}),
		"kubeadm-init.sh", "/c.yaml", "/i.log", "6443", HeldSchedulerManifest, SchedulerManifest, "timeout", "3")
	check(LateAddonsCommand("/a.conf", "/l.log", "/s.yaml", "/n.yaml"), "late-addons.sh", "/a.conf", "/l.log", "/s.yaml", "/n.yaml")
	check(CleanNamespacesCommand("/a.conf"), "clean-namespaces.sh", "/a.conf")
	check(MemoryCommand(), "memory.sh")
	check(ProxyEnvCommand("http://p:3128", "", "localhost,.svc"), "proxy-env.sh", "http://p:3128", "", "localhost,.svc")
	if cmd := WaitJobCommand("/a.conf", "job/x", "default", "30s"); cmd[0] != "bash" {
		t.Errorf("wait-job.sh needs bash (wait -n -p), runs with %s", cmd[0])
	} else {
		check(cmd, "wait-job.sh", "/a.conf", "job/x", "default", "30s")
	}
	check(ImportImagesCommand("linux/amd64", []ImageLabel{{"", "docker.io/library/a:1", "k=sha256:aa"}, {"localhost/b:2", "docker.io/library/b:2", "k=sha256:bb"}}),
		"import-images.sh", "linux/amd64", "", "docker.io/library/a:1", "k=sha256:aa", "localhost/b:2", "docker.io/library/b:2", "k=sha256:bb")
	hosts := []RegistryHosts{{Name: "localhost:5001", Server: "http://c-registry:5000"}, {Name: "docker.io", Mirrors: []string{"http://m1:5000", "https://m2/v2"}}}
	check(RegistryHostsCommand("/etc/containerd/certs.d", "c-registry", "http://c-registry:5000/v2/", hosts), "registry-hosts.sh", "/etc/containerd/certs.d", "c-registry", "http://c-registry:5000/v2/",
		"localhost:5001", hosts[0].TOML(), "docker.io", hosts[1].TOML())
	if net := NodeNetworkCommand(NodeNetwork{}); !strings.Contains(net[2], CNIConfigPath) {
		t.Errorf("node-network.sh does not write %s", CNIConfigPath)
	}
}

func TestRegistryHostsTOML(t *testing.T) {
	own := RegistryHosts{Name: "localhost:5001", Server: "http://c-registry:5000"}.TOML()
	if want := "server = \"http://c-registry:5000\"\n\n[host.\"http://c-registry:5000\"]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n"; own != want {
		t.Errorf("the cluster's registry:\n%s\nwant:\n%s", own, want)
	}
	mirrored := RegistryHosts{Name: "docker.io", Mirrors: []string{"http://m1:5000", "https://m2/v2"}}.TOML()
	if want := "[host.\"http://m1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n\n[host.\"https://m2/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n\n"; mirrored != want {
		t.Errorf("mirrors, in order:\n%s\nwant:\n%s", mirrored, want)
	}
}

// TestScriptsLint checks every embedded script: its shell's syntax check
// always, and shellcheck, which CI installs (.ci/run). Each script runs
// under the shell its #! line names (sh, the node's dash, or bash), and
// shellcheck checks it as that shell's.
func TestScriptsLint(t *testing.T) {
	names, err := fs.Glob(scripts, "scripts/*.sh")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded scripts (%v)", err)
	}
	_, lookErr := exec.LookPath("shellcheck")
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			text, err := fs.ReadFile(scripts, name)
			if err != nil {
				t.Fatal(err)
			}
			shell := interpreter(string(text))
			if shell != "sh" && shell != "bash" {
				t.Fatalf("#! names %s: the nodes run sh and bash scripts", shell)
			}
			syntax := exec.Command(shell, "-n")
			syntax.Stdin = bytes.NewReader(text)
			if out, err := syntax.CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
			if lookErr != nil {
				if os.Getenv("CI") != "" {
					t.Fatal("shellcheck is not installed (apt-get install shellcheck)")
				}
				t.Skipf("shellcheck is not installed (apt-get install shellcheck): only %s -n checked the script", shell)
			}
			lint := exec.Command("shellcheck", "-s", shell, "-")
			lint.Stdin = bytes.NewReader(text)
			if out, err := lint.CombinedOutput(); err != nil {
				t.Errorf("shellcheck: %v\n%s", err, out)
			}
		})
	}
}

func TestAddonManifestsGolden(t *testing.T) {
	storage := StorageAddon{Image: "kindtest.invalid/local-path-provisioner:v0", Class: "standard", Root: "/var/local-path", APIHost: "192.0.2.7", APIPort: 6443}.Manifest()
	netpol := NetworkPolicyAddon{Image: "kindtest.invalid/kube-network-policies:v0", Name: "kube-network-policies", APIHost: "192.0.2.7", APIPort: 6443}.Manifest()
	for name, m := range map[string]string{"storage.golden": storage, "network-policy.golden": netpol} {
		docs := yamlDocs(t, m)
		if len(docs) < 3 {
			t.Errorf("%s: %d documents, want the ServiceAccount, RBAC and workload", name, len(docs))
		}
		for _, want := range []string{"192.0.2.7", "6443", "kindtest.invalid/"} {
			if !strings.Contains(m, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
		golden(t, name, []byte(m))
	}
}

func TestObjects(t *testing.T) {
	objs, err := Objects(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
spec:
  replicas: 2
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules: []
`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Kind+" "+o.Path)
	}
	want := []string{
		"ServiceAccount /api/v1/namespaces/kube-system/serviceaccounts",
		"ClusterRole /apis/rbac.authorization.k8s.io/v1/clusterroles",
		"Deployment /apis/apps/v1/namespaces/kube-system/deployments",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
	if string(objs[2].Body) != `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"coredns","namespace":"kube-system"},"spec":{"replicas":2}}` {
		t.Errorf("body %s", objs[2].Body)
	}
	for _, bad := range []string{"kind: Secret\napiVersion: v1\nmetadata: {name: x}\n", "apiVersion: v1\nkind: ConfigMap\n", "a: [\n"} {
		if _, err := Objects(bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestRootCAConfigMap(t *testing.T) {
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	objs, err := Objects("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: kube-proxy, namespace: kube-system}\n---\n" + RootCAConfigMap(pem))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].Kind != "ConfigMap" || objs[0].Path != "/api/v1/namespaces/kube-system/configmaps" {
		t.Fatalf("objects %+v, want the ConfigMap of kube-system before the DaemonSet", objs)
	}
	var cm struct {
		Metadata struct {
			Name        string
			Annotations map[string]string
		}
		Data map[string]string
	}
	if err := json.Unmarshal(objs[0].Body, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Metadata.Name != "kube-root-ca.crt" || cm.Data["ca.crt"] != pem || len(cm.Data) != 1 {
		t.Errorf("ConfigMap %s: want kube-root-ca.crt with ca.crt the PEM as given", objs[0].Body)
	}
	// The publisher rewrites a ConfigMap whose description is missing.
	if !strings.HasPrefix(cm.Metadata.Annotations["kubernetes.io/description"], "Contains a CA bundle") {
		t.Errorf("annotations %v: want the root CA publisher's description", cm.Metadata.Annotations)
	}
}

func TestDiscoveryKubeconfig(t *testing.T) {
	var kc struct {
		Clusters []struct {
			Name    string
			Cluster map[string]string
		}
		Users []struct {
			Name string
			User map[string]string
		}
		Contexts []struct {
			Name    string
			Context map[string]string
		}
		CurrentContext string `yaml:"current-context"`
	}
	if err := yaml.Unmarshal([]byte(DiscoveryKubeconfig("https://172.18.0.2:6443", "Q0FEQVRB")), &kc); err != nil {
		t.Fatal(err)
	}
	if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster["server"] != "https://172.18.0.2:6443" || kc.Clusters[0].Cluster["certificate-authority-data"] != "Q0FEQVRB" {
		t.Errorf("clusters: %+v", kc.Clusters)
	}
	// kubeadm requires the current context's user to exist; it must hold
	// no credentials (kubeadm would then use them rather than the token).
	if len(kc.Contexts) != 1 || kc.Contexts[0].Name != kc.CurrentContext || kc.Contexts[0].Context["cluster"] != kc.Clusters[0].Name {
		t.Errorf("contexts: %+v, current %q", kc.Contexts, kc.CurrentContext)
	}
	if len(kc.Users) != 1 || kc.Users[0].Name != kc.Contexts[0].Context["user"] || len(kc.Users[0].User) != 0 {
		t.Errorf("users: %+v", kc.Users)
	}
}

// TestChain runs chained commands in a real shell: every word arrives
// as it was given, the steps run in order, and the first failure stops
// the rest and is named.
func TestChain(t *testing.T) {
	echo := []string{"sh", "-c", `printf '%s|' "$@"; echo`, "echo.sh", "a b", `$(false)`, "'", ""}
	fail := []string{"sh", "-c", "exit 3", "fail.sh"}
	never := []string{"sh", "-c", "echo never", "never.sh"}
	if got := Chain(echo); !slices.Equal(got, echo) {
		t.Errorf("one command is run as it is: %q", got)
	}
	cmd := Chain(echo, echo)
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	if want := "a b|$(false)|'||\na b|$(false)|'||\n"; err != nil || string(out) != want {
		t.Errorf("two steps: %q, %v; want %q", out, err, want)
	}
	cmd = Chain(echo, fail, never)
	out, err = exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "fail.sh failed (exit 3)") || strings.Contains(string(out), "never") {
		t.Errorf("a failing step: %q, %v", out, err)
	}
	// More than nine arguments: the shell must read ${10} as the tenth.
	many := append([]string{"sh", "-c", `echo "$#:$9:${10}"`, "many.sh"}, strings.Split("1 2 3 4 5 6 7 8 9 10", " ")...)
	cmd = Chain(echo, many)
	if out, err := exec.Command(cmd[0], cmd[1:]...).Output(); err != nil || !strings.HasSuffix(string(out), "10:9:10\n") {
		t.Errorf("many arguments: %q, %v", out, err)
	}
}

// TestPrebootScript runs kubeadm-preboot.sh on this host with a stand-in
// for kubeadm (the script's own logic, not kubeadm's, is under test):
// files from standard input, the phases in order, the manifest held
// back, and output that Parse reads back; a failing phase fails it.
func TestPrebootScript(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	manifest, held := filepath.Join(dir, "manifests/s.yaml"), filepath.Join(dir, "held/s.yaml")
	fake := `#!/bin/sh
# kubeadm init phase NAME [SUB] ... | kubeadm init phase addon NAME --print-manifest ...
case "$3" in
addon)
  [ "$4" = broken ] && { echo "unknown add-on" >&2; exit 1; }
  [ "$4" = kube-proxy ] && echo "W1206 12:00:00.000000 1 warnings.go:1] ipvs is deprecated" >&2
  echo "kind: $4 with $7"; exit 0 ;;
fail) echo "phase fail: broken"; exit 1 ;;
control-plane) mkdir -p "$(dirname "$MANIFEST")"; echo scheduler > "$MANIFEST" ;;
esac
echo "phase $3 $4"
`
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kubeadm"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Preboot{Config: filepath.Join(dir, "k.yaml"), AddonConfig: filepath.Join(dir, "a.yaml"), Log: filepath.Join(dir, "p.log"),
		Files:  []File{{filepath.Join(dir, "k.yaml"), "config\n"}, {filepath.Join(dir, "sub/m.yaml"), "no newline"}},
		Addons: []string{"kube-proxy", "coredns"}, Print: []string{filepath.Join(dir, "k.yaml")}}
	run := func(phases ...string) (string, error) {
		args := []string{p.Config, p.AddonConfig, p.Log, manifest, held}
		for _, f := range p.Files {
			args = append(args, f.Path, strconv.Itoa(len(f.Content)))
		}
		args = append(append(append(append(append(append(args, "--"), p.Addons...), "--"), p.Print...), "--"), phases...)
		cmd := command("kubeadm-preboot.sh", args...)
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MANIFEST="+manifest)
		c.Stdin = strings.NewReader(p.Input())
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return stderr.String(), err
		}
		return string(out), nil
	}
	out, err := run("certs all", "control-plane all")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	parts, err := p.Parse(out)
	if err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	// The add-ons are printed with the configuration without patches.
	if parts["kube-proxy"] != "kind: kube-proxy with "+p.AddonConfig+"\n" || parts["coredns"] != "kind: coredns with "+p.AddonConfig+"\n" || parts[p.Config] != "config\n" {
		t.Errorf("parts %q", parts)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub/m.yaml")); string(b) != "no newline" {
		t.Errorf("second file %q", b)
	}
	// kubeadm's warnings while printing an add-on go to the log, not into
	// its manifests (the kube-proxy part above is only the manifest).
	if b, _ := os.ReadFile(p.Log); string(b) != "phase certs all\nphase control-plane all\nW1206 12:00:00.000000 1 warnings.go:1] ipvs is deprecated\n" {
		t.Errorf("log %q", b)
	}
	if b, err := os.ReadFile(held); string(b) != "scheduler\n" {
		t.Errorf("held manifest %q, %v", b, err)
	}
	if _, err := (Preboot{Addons: []string{"x"}}).Parse(out); err == nil {
		t.Error("Parse took output without the add-on it asked for")
	}
	p.Addons = []string{"broken"}
	if out, err := run("control-plane all"); err == nil || !strings.Contains(out, "could not print the broken add-on's manifests") || !strings.Contains(out, "unknown add-on") {
		t.Errorf("a failed add-on: %v, %q", err, out)
	}
	p.Addons = nil
	if out, err := run("certs all", "fail now"); err == nil || !strings.Contains(out, "kubeadm init phase fail now failed") || !strings.Contains(out, "phase fail: broken") {
		t.Errorf("a failed phase: %v, %q", err, out)
	}
}

// TestJoinScript runs kubeadm-join.sh on this host with a stand-in for
// kubeadm: the files are written before kubeadm runs, its output is kept
// in the log, and a failure shows the log's tail.
func TestJoinScript(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\ncat \"$3\"; cat \"$DISCOVERY\"; [ -z \"$FAIL\" ] || { echo broken; exit 1; }\n"
	if err := os.WriteFile(filepath.Join(bin, "kubeadm"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	j := KubeadmJoin{Config: filepath.Join(dir, "k.yaml"), Log: filepath.Join(dir, "j.log"),
		Files: []File{{filepath.Join(dir, "k.yaml"), "config;"}, {filepath.Join(dir, "d/discovery.conf"), "discovery;"}}}
	run := func(fail string) (string, error) {
		cmd := j.Command()
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "DISCOVERY="+j.Files[1].Path, "FAIL="+fail)
		c.Stdin = strings.NewReader(j.Input())
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if out, err := run(""); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile(j.Log); string(b) != "config;discovery;" {
		t.Errorf("log %q", b)
	}
	if out, err := run("yes"); err == nil || !strings.Contains(out, "kubeadm join failed") || !strings.Contains(out, "config;discovery;broken") {
		t.Errorf("a failed join: %v, %q", err, out)
	}
}
