package kindtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// featureGate is an alpha gate, off by default, whose state the API
// server's metrics show.
const featureGate = "ContainerStopSignals"

// TestClusterSettings makes one cluster (a control plane and a worker)
// with every kind of setting and checks each took effect.
func TestClusterSettings(t *testing.T) {
	dc := engine(t)
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "hello"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	c := start(t, dc,
		kindtest.WithWorkers(1),
		kindtest.WithFeatureGates(map[string]bool{featureGate: true}),
		kindtest.WithRuntimeConfig(map[string]string{"internal.apiserver.k8s.io/v1alpha1": "true"}),
		kindtest.WithComponentArgs(kindtest.KubeAPIServer, "--audit-log-maxage=3"),
		kindtest.WithComponentArgs(kindtest.KubeScheduler, "v=3"),
		kindtest.WithComponentArgs(kindtest.Kubelet, "--v=3"),
		kindtest.WithKubeletConfig("maxPods: 57\n"),
		kindtest.WithNodeLabels(0, map[string]string{"example.com/tier": "control"}),
		kindtest.WithNodeLabels(1, map[string]string{"example.com/tier": "backend", "node.kubernetes.io/pool": "special"}),
		kindtest.WithNodeTaints(1, "example.com/dedicated=special:NoSchedule"),
		kindtest.WithNodeMounts(1, kindtest.Mount{HostPath: hostDir, ContainerPath: "/mnt/host", ReadOnly: true}),
	)
	t.Logf("cluster with settings ready in %v", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, worker := c.ControlPlane(), c.Workers()[0]

	t.Run("feature gate in API server metrics", func(t *testing.T) {
		res, err := c.Kubectl(ctx, "get", "--raw", "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`kubernetes_feature_enabled{name=%q,stage="ALPHA"} 1`, featureGate)
		if !strings.Contains(res.Stdout, want+"\n") {
			var seen []string
			for _, l := range strings.Split(res.Stdout, "\n") {
				if strings.Contains(l, featureGate) {
					seen = append(seen, l)
				}
			}
			t.Errorf("metrics lack %s; lines naming the gate: %q", want, seen)
		}
	})

	t.Run("feature gate in kubelet, kube-proxy, controller-manager and scheduler", func(t *testing.T) {
		for _, n := range c.Nodes() {
			res, err := c.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/"+n.Name()+"/proxy/configz")
			if err != nil {
				t.Fatal(err)
			}
			var cz struct {
				KubeletConfig struct {
					FeatureGates map[string]bool `json:"featureGates"`
					MaxPods      int             `json:"maxPods"`
				} `json:"kubeletconfig"`
			}
			if err := json.Unmarshal([]byte(res.Stdout), &cz); err != nil {
				t.Fatalf("configz of %s: %v\n%s", n.Name(), err, res.Stdout)
			}
			if !cz.KubeletConfig.FeatureGates[featureGate] {
				t.Errorf("kubelet of %s: featureGates %v", n.Name(), cz.KubeletConfig.FeatureGates)
			}
			// WithKubeletConfig's field, merged into kindtest's.
			if cz.KubeletConfig.MaxPods != 57 {
				t.Errorf("kubelet of %s: maxPods %d, want 57", n.Name(), cz.KubeletConfig.MaxPods)
			}
		}
		res, err := c.Kubectl(ctx, "-n", "kube-system", "get", "configmap", "kube-proxy", "-o", "jsonpath={.data.config\\.conf}")
		if err != nil || !regexp.MustCompile(`(?m)^\s+`+featureGate+`: true$`).MatchString(res.Stdout) {
			t.Errorf("kube-proxy configuration (%v):\n%s", err, res.Stdout)
		}
		for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if out, err := cp.Exec(ctx, "grep", "-x", "    - --feature-gates="+featureGate+"=true", "/etc/kubernetes/manifests/"+comp+".yaml"); err != nil {
				t.Errorf("%s manifest lacks the gate: %v %s", comp, err, out.Stdout)
			}
		}
	})

	t.Run("runtime config serves an alpha API", func(t *testing.T) {
		res, err := c.Kubectl(ctx, "api-versions")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Stdout, "internal.apiserver.k8s.io/v1alpha1\n") {
			t.Errorf("api-versions lacks internal.apiserver.k8s.io/v1alpha1:\n%s", res.Stdout)
		}
		if _, err := c.Kubectl(ctx, "get", "storageversions.internal.apiserver.k8s.io"); err != nil {
			t.Errorf("storageversions not served: %v", err)
		}
	})

	t.Run("component args in effect", func(t *testing.T) {
		// In the static pod manifest and in the running process.
		if _, err := cp.Exec(ctx, "grep", "-x", "    - --audit-log-maxage=3", "/etc/kubernetes/manifests/kube-apiserver.yaml"); err != nil {
			t.Errorf("kube-apiserver manifest: %v", err)
		}
		for proc, flag := range map[string]string{"kube-apiserver": "--audit-log-maxage=3", "kube-scheduler": "--v=3"} {
			res, err := cp.Exec(ctx, "sh", "-c", "tr '\\0' ' ' < /proc/$(pgrep -xo "+proc+")/cmdline")
			if err != nil || !strings.Contains(res.Stdout+" ", " "+flag+" ") {
				t.Errorf("%s runs with %q (%v), want %s", proc, res.Stdout, err, flag)
			}
		}
		for _, n := range c.Nodes() {
			res, err := n.Exec(ctx, "sh", "-c", "tr '\\0' ' ' < /proc/$(pgrep -xo kubelet)/cmdline")
			if err != nil || !strings.Contains(res.Stdout+" ", " --v=3 ") {
				t.Errorf("kubelet of %s runs with %q (%v), want --v=3", n.Name(), res.Stdout, err)
			}
		}
	})

	t.Run("node labels", func(t *testing.T) {
		for n, want := range map[string]string{cp.Name(): "control", worker.Name(): "backend"} {
			res, err := c.Kubectl(ctx, "get", "node", n, "-o", `jsonpath={.metadata.labels.example\.com/tier} {.metadata.labels.kindtest\.dev/node-index}`)
			if err != nil {
				t.Fatal(err)
			}
			if f := strings.Fields(res.Stdout); len(f) != 2 || f[0] != want {
				t.Errorf("node %s labels: %q, want example.com/tier=%s and kindtest's node index", n, res.Stdout, want)
			}
		}
		res, err := c.Kubectl(ctx, "get", "nodes", "-l", "node.kubernetes.io/pool=special", "-o", "name")
		if err != nil || strings.TrimSpace(res.Stdout) != "node/"+worker.Name() {
			t.Errorf("nodes of pool special: %q %v", res.Stdout, err)
		}
	})

	t.Run("tainted worker takes only tolerating pods", func(t *testing.T) {
		res, err := c.Kubectl(ctx, "get", "node", worker.Name(), "-o", `jsonpath={range .spec.taints[*]}{.key}={.value}:{.effect}{"\n"}{end}`)
		if err != nil || !strings.Contains(res.Stdout, "example.com/dedicated=special:NoSchedule\n") {
			t.Fatalf("worker taints %q %v", res.Stdout, err)
		}
		// The control plane keeps kubeadm's taint: a pod that tolerates
		// neither has nowhere to go.
		image, err := c.Kubectl(ctx, "-n", "kube-system", "get", "daemonset", "kube-proxy", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		if err != nil {
			t.Fatal(err)
		}
		pod := func(name, toleration string) string {
			return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sleep", "3600"]
%s`, name, image.Stdout, toleration)
		}
		manifest := pod("plain", "") + "---\n" + pod("tolerating", `  tolerations:
  - key: example.com/dedicated
    operator: Equal
    value: special
    effect: NoSchedule
`)
		if err := c.Apply(ctx, []byte(manifest)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "wait", "pod/tolerating", "--for=condition=Ready", "--timeout=2m"); err != nil {
			t.Fatalf("tolerating pod not ready: %v", err)
		}
		res, err = c.Kubectl(ctx, "get", "pod", "tolerating", "-o", "jsonpath={.spec.nodeName}")
		if err != nil || res.Stdout != worker.Name() {
			t.Errorf("tolerating pod on %q (%v), want %s", res.Stdout, err, worker.Name())
		}
		if _, err := c.Kubectl(ctx, "wait", "pod/plain", `--for=jsonpath={.status.conditions[?(@.type=="PodScheduled")].reason}=Unschedulable`, "--timeout=1m"); err != nil {
			res, _ := c.Kubectl(ctx, "get", "pod", "plain", "-o", "wide")
			t.Errorf("the pod without toleration was not found unschedulable: %v\n%s", err, res.Stdout)
		}
		res, err = c.Kubectl(ctx, "get", "pod", "plain", "-o", "jsonpath={.spec.nodeName}|{.status.phase}")
		if err != nil || res.Stdout != "|Pending" {
			t.Errorf("pod without toleration: node|phase %q (%v), want it Pending on no node", res.Stdout, err)
		}
	})

	t.Run("extra mount", func(t *testing.T) {
		res, err := worker.Exec(ctx, "cat", "/mnt/host/hello")
		if err != nil || res.Stdout != "from the host\n" {
			t.Errorf("/mnt/host/hello on the worker: %q %v", res.Stdout, err)
		}
		if _, err := worker.Exec(ctx, "touch", "/mnt/host/new"); err == nil {
			t.Error("the read-only mount is writable")
		}
		if _, err := cp.Exec(ctx, "test", "-e", "/mnt/host"); err == nil {
			t.Error("the control plane has the worker's mount")
		}
	})
}

// TestSettingsRejectedBeforeCreate: a setting that can only be checked
// once the engine is known (a missing host path on a local engine) is
// still refused before anything is created.
func TestSettingsRejectedBeforeCreate(t *testing.T) {
	dc := engine(t)
	before := leftovers(t, dc, map[string]string{kindtest.LabelSession: kindtest.Session()})
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := kindtest.New(context.Background(), kindtest.WithImage(nodeImage(t, dc)),
		kindtest.WithNodeMounts(0, kindtest.Mount{HostPath: missing, ContainerPath: "/data"}))
	if err == nil || !strings.Contains(err.Error(), "invalid options") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing host path: %v", err)
	}
	t.Log(err)
	if after := leftovers(t, dc, map[string]string{kindtest.LabelSession: kindtest.Session()}); after != before {
		t.Errorf("%d engine objects of this session before, %d after a refused New", before, after)
	}
}
