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
		// A custom resource in default: the cleanup must find its kind by
		// asking the API, not from a list written in advance.
		if err := c.Apply(ctx, []byte(leftoverCRD)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "crd/widgets.example.kindtest.dev", "--timeout=60s"); err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, []byte("apiVersion: example.kindtest.dev/v1\nkind: Widget\nmetadata:\n  name: leftover\n  namespace: default\n")); err != nil {
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
		res, err = c.Kubectl(ctx, "get", "widgets", "-n", "default", "-o", "name")
		if err != nil || strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("custom resources in default after reuse: %q %v", res.Stdout, err)
		}
		res, err = c.Kubectl(ctx, "get", "services,serviceaccounts", "-n", "default", "-o", "name")
		if err != nil || !strings.Contains(res.Stdout, "service/kubernetes") || !strings.Contains(res.Stdout, "serviceaccount/default") {
			t.Errorf("what Kubernetes keeps in default is gone after reuse: %q %v", res.Stdout, err)
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

// leftoverCRD defines a namespaced custom resource kind that no fixed list
// of kinds knows.
const leftoverCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.kindtest.dev
spec:
  group: example.kindtest.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`
