package kindtest

import (
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/imageref"
)

// TestUnitNetworkPolicyOption checks the default, WithoutNetworkPolicy and
// WithoutDefaultCNI (which never gets the agent), and that a reused
// cluster is only attached to by runs that agree on the agent.
func TestUnitNetworkPolicyOption(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want bool
	}{
		{"default", nil, true},
		{"WithoutNetworkPolicy", []Option{WithoutNetworkPolicy()}, false},
		{"WithoutDefaultCNI", []Option{WithoutDefaultCNI()}, false},
		{"WithoutKubernetes", []Option{WithoutKubernetes()}, false},
		{"WithoutStorage", []Option{WithoutStorage()}, true},
	} {
		cfg, err := newConfig(tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := cfg.networkPolicyEnforced(); got != tc.want {
			t.Errorf("%s: network policy enforced %t, want %t", tc.name, got, tc.want)
		}
	}
	def, _ := newConfig(nil)
	without, _ := newConfig([]Option{WithoutNetworkPolicy()})
	if reuseHash(def, "sha256:x") == reuseHash(without, "sha256:x") {
		t.Fatal("clusters with and without the policy agent share a reuse hash")
	}
}

// TestUnitNetworkPolicyManifest checks what the agent's manifest is filled
// in with: the preloaded image, never pulled, the API server's address,
// the node's name, and the privileges the agent needs on the host network.
func TestUnitNetworkPolicyManifest(t *testing.T) {
	m := networkPolicyManifest("192.0.2.7", 6443)
	if strings.Contains(m, "{{") {
		t.Fatalf("unreplaced placeholder in the network policy manifest:\n%s", m)
	}
	for _, want := range []string{
		"image: " + imageref.NetworkPolicies + "\n",
		"imagePullPolicy: IfNotPresent\n",
		"kind: DaemonSet\nmetadata:\n  name: " + NetworkPolicyDaemonSet + "\n  namespace: kube-system\n",
		"hostNetwork: true\n",
		"privileged: true\n",
		"- --hostname-override=$(NODE_NAME)\n",
		"- --disable-nri\n",
		"fieldPath: spec.nodeName\n",
		"- name: KUBERNETES_SERVICE_HOST\n          value: \"192.0.2.7\"\n",
		"- name: KUBERNETES_SERVICE_PORT\n          value: \"6443\"\n",
		`resources: ["networkpolicies"]`,
		`resources: ["pods", "namespaces"]`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("network policy manifest lacks %q", want)
		}
	}
}
