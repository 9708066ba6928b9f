package kindtest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
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

// TestServingFiles checks the serving certificates the controller-manager
// and the scheduler are given: a key that matches, a certificate that its
// CA, in the same file, signed for localhost and 127.0.0.1, valid for a
// year, and the flags that name the files.
func TestServingFiles(t *testing.T) {
	files, err := servingFiles()
	if err != nil {
		t.Fatal(err)
	}
	content := map[string]string{}
	for _, f := range files {
		content[f.Path] = f.Content
	}
	if len(content) != 2*len(servingComponents) {
		t.Fatalf("%d files, want a certificate and a key for each of %v", len(content), servingComponents)
	}
	for _, component := range servingComponents {
		args := servingArgs(component)
		crt, key := content[args[0].value], content[args[1].value]
		pair, err := tls.X509KeyPair([]byte(crt), []byte(key))
		if err != nil {
			t.Fatalf("%s: %v", component, err)
		}
		if len(pair.Certificate) != 2 {
			t.Fatalf("%s: %d certificates in %s, want the certificate and its CA", component, len(pair.Certificate), args[0].value)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		ca, err := x509.ParseCertificate(pair.Certificate[1])
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		for _, name := range []string{"localhost", "127.0.0.1"} {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: time.Now().Add(364 * 24 * time.Hour)}); err != nil {
				t.Errorf("%s: a year from now, for %s: %v", component, name, err)
			}
		}
	}
}
