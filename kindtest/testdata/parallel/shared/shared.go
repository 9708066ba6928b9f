// Package shared is what each parallel test package runs.
package shared

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

// Check starts a cluster and checks that it is whole and its own.
func Check(t *testing.T) {
	c := kindtest.Start(t)
	ctx := context.Background()
	res, err := c.Kubectl(ctx, "get", "nodes", "-o", "name")
	if err != nil || strings.TrimSpace(res.Stdout) != "node/"+c.ControlPlane().Name() {
		t.Fatalf("nodes %q (%v)", res.Stdout, err)
	}
	kc, err := os.ReadFile(c.KubeconfigPath())
	if err != nil || !strings.Contains(string(kc), c.APIServer()) {
		t.Fatalf("kubeconfig %s: %v", c.KubeconfigPath(), err)
	}
	// Parsed by the parent test.
	t.Logf("PARALLEL cluster=%s api=%s kubeconfig=%s", c.Name(), c.APIServer(), c.KubeconfigPath())
}
