package kindtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestReuse(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	ctx := context.Background()
	opts := []kindtest.Option{kindtest.WithImage(img), kindtest.WithReuse(), kindtest.WithNamePrefix("reusetest")}
	made := map[string]bool{}
	t.Cleanup(func() {
		for name := range made {
			if err := kindtest.DeleteCluster(context.Background(), name); err != nil {
				t.Error(err)
			}
		}
	})

	var first string
	t.Run("first run creates and keeps", func(t *testing.T) {
		c := kindtest.Start(t, opts...)
		first = c.Name()
		made[first] = true
		if _, err := c.Kubectl(ctx, "create", "namespace", "leftover"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "create", "configmap", "leftover", "--from-literal=a=b"); err != nil {
			t.Fatal(err)
		}
	})
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: first}); n == 0 {
		t.Fatalf("the reusable cluster %s was removed after the first run", first)
	}

	t.Run("second run attaches to a clean cluster", func(t *testing.T) {
		c := kindtest.Start(t, opts...)
		if c.Name() != first {
			made[c.Name()] = true
			t.Fatalf("second run got a new cluster %s, want %s", c.Name(), first)
		}
		res, err := c.Kubectl(ctx, "get", "namespaces", "-o", "name")
		if err != nil || strings.Contains(res.Stdout, "leftover") {
			t.Errorf("namespaces after reuse: %q %v", res.Stdout, err)
		}
		res, err = c.Kubectl(ctx, "get", "configmaps", "-o", "name")
		if err != nil || strings.Contains(res.Stdout, "leftover") || !strings.Contains(res.Stdout, "kube-root-ca.crt") {
			t.Errorf("configmaps in default after reuse: %q %v", res.Stdout, err)
		}
		if _, err := c.Kubectl(ctx, "create", "namespace", "leftover"); err != nil {
			t.Errorf("the name of a cleaned namespace cannot be used again: %v", err)
		}

		t.Run("a cluster in use is not attached to", func(t *testing.T) {
			other := kindtest.Start(t, opts...)
			made[other.Name()] = true
			if other.Name() == first {
				t.Fatalf("attached to %s while another run uses it", first)
			}
		})
	})

	t.Run("another configuration gets another cluster", func(t *testing.T) {
		c := kindtest.Start(t, append(opts, kindtest.WithoutKubernetes())...)
		made[c.Name()] = true
		if c.Name() == first {
			t.Fatalf("a cluster without Kubernetes attached to %s", first)
		}
	})
}
