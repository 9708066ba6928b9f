package kindtest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden files of TestKubeadmConfigGolden")

// TestKubeadmConfigGolden renders the kubeadm configuration of a control
// plane and a worker with every setting used, checks that each document is
// YAML, and compares the whole with testdata/kubeadm-*.golden (rewrite
// them with -update-golden after a deliberate change, and read the diff).
func TestKubeadmConfigGolden(t *testing.T) {
	cfg, err := newConfig([]Option{
		WithWorkers(1),
		WithFeatureGates(map[string]bool{"ContainerStopSignals": true, "APIServerIdentity": false}),
		WithRuntimeConfig(map[string]string{"api/alpha": "true", "internal.apiserver.k8s.io/v1alpha1": "true"}),
		WithComponentArgs(KubeAPIServer, "--audit-log-maxage=3", "v=2", "--watch-cache=true"),
		WithComponentArgs(KubeControllerManager, "--kube-api-qps=50"),
		WithComponentArgs(KubeScheduler, "--v=3"),
		WithComponentArgs(Etcd, "--unsafe-no-fsync=false"),
		WithComponentArgs(Kubelet, "--v=4"),
		WithKubeletConfig("maxPods: 50\nevictionHard:\n  memory.available: 1Mi\n"),
		WithNodeLabels(0, map[string]string{"tier": "control"}),
		WithNodeLabels(1, map[string]string{"tier": "work", "node.kubernetes.io/pool": "a"}),
		WithNodeTaints(0, "dedicated=cp:NoExecute"),
		WithNodeTaints(1, "dedicated=special:NoSchedule", "gpu:PreferNoSchedule"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cp := &Node{name: "c-control-plane", ip: "172.18.0.2", role: RoleControlPlane}
	w := &Node{name: "c-worker", ip: "172.18.0.3", index: 1, role: RoleWorker}
	for name, got := range map[string]string{
		"kubeadm-init.golden": kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", timeout: time.Minute, settings: &cfg.settings}),
		"kubeadm-join.golden": kubeadmJoinConfig(w, KubernetesVersion, "abcdef.0123456789abcdef", time.Minute, &cfg.settings),
	} {
		dec := yaml.NewDecoder(strings.NewReader(got))
		for i := 0; ; i++ {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil {
				if err.Error() != "EOF" {
					t.Errorf("%s: document %d is not YAML: %v\n%s", name, i, err, got)
				}
				break
			}
		}
		file := filepath.Join("testdata", name)
		if *updateGolden {
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, []byte(got)) {
			t.Errorf("%s differs from the rendered configuration (run with -update-golden after a deliberate change):\n%s", file, got)
		}
	}
}
