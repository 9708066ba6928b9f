package kindtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/poll"
)

// namespaceAnnotation records, on a namespace made by Namespace, the full
// name of the test it was made for.
const namespaceAnnotation = lifetime.KubeAnnotationTest

// namespaceDeleteTimeout bounds the wait for a test's namespace to be gone.
const namespaceDeleteTimeout = 2 * time.Minute

// Namespace creates a namespace for the test and returns its name: the
// test's name made DNS-safe and a random suffix, at most 63 characters,
// labelled with the cluster (NamespaceLabelCluster) and the session
// (NamespaceLabelSession) and annotated with the test's full name. It
// returns once the namespace's default ServiceAccount exists, so that a
// pod can be created in it at once. At the test's cleanup its pods
// are deleted without a grace period, then the namespace, and the cleanup
// waits (up to 2 minutes) until it is gone. t may be a parallel subtest
// or Ginkgo's GinkgoT(). A failure, and a call after the cluster was
// deleted, fail the test through t.Fatalf.
func (c *Cluster) Namespace(t TB) string {
	t.Helper()
	if err := c.usable("namespace"); err != nil {
		t.Fatalf("kindtest: %v", err)
	}
	name := namespaceName(t.Name())
	t.Cleanup(func() {
		if c.life.closed.Load() {
			// The cluster, and the namespace with it, is gone already.
			return
		}
		start := time.Now()
		if err := c.deleteNamespace(name); err != nil {
			t.Fatalf("kindtest: %v", err)
		}
		t.Logf("kindtest: %s: namespace %s deleted in %v", c.name, name, time.Since(start).Round(time.Millisecond))
	})
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		t.Fatalf("kindtest: namespace %s: %v", name, err)
	}
	defer api.close()
	ns := map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata": map[string]any{
			"name":        name,
			"labels":      map[string]string{NamespaceLabelCluster: c.name, NamespaceLabelSession: Session()},
			"annotations": map[string]string{namespaceAnnotation: t.Name()},
		},
	}
	if err := api.do(ctx, "POST", "/api/v1/namespaces", ns, nil); err != nil {
		t.Fatalf("kindtest: cluster %s: create namespace %s: %v", c.name, name, err)
	}
	if err := waitDefaultServiceAccount(ctx, api, name); err != nil {
		t.Fatalf("kindtest: cluster %s: namespace %s: %v", c.name, name, err)
	}
	return name
}

// waitDefaultServiceAccount waits until the namespace's "default"
// ServiceAccount exists. The controller-manager makes it after the
// namespace, and until then the API server refuses every pod that does
// not name another account (serviceaccount "default" not found); on a
// busy cluster, or right after a control-plane failover, that takes
// seconds. Kubernetes' own e2e framework waits for it for that reason.
func waitDefaultServiceAccount(ctx context.Context, api *apiClient, ns string) error {
	path := "/api/v1/namespaces/" + ns + "/serviceaccounts/default"
	var last error
	err := poll.Until(ctx, 20*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
		last = api.get(ctx, path, nil)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("its default ServiceAccount did not appear (%v; last answer: %v): the controller-manager makes it; see its log in the cluster's exported logs", err, last)
	}
	return nil
}

// deleteNamespace deletes a namespace, its pods without grace period, and
// waits until it is gone. One that does not exist counts as deleted.
func (c *Cluster) deleteNamespace(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), namespaceDeleteTimeout)
	defer cancel()
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	path := "/api/v1/namespaces/" + name
	grace0 := map[string]any{"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
	if err := api.do(ctx, "DELETE", path+"/pods", grace0, nil); err != nil && !isStatus(err, 404) {
		return fmt.Errorf("cluster %s: namespace %s: delete pods: %w", c.name, name, err)
	}
	if err := api.do(ctx, "DELETE", path, nil, nil); err != nil && !isStatus(err, 404) {
		return fmt.Errorf("cluster %s: delete namespace %s: %w", c.name, name, err)
	}
	var ns struct {
		Status struct {
			Phase      string      `json:"phase"`
			Conditions []condition `json:"conditions"`
		} `json:"status"`
	}
	var last error
	err = poll.Until(ctx, 50*time.Millisecond, time.Second, func() (bool, error) {
		last = api.get(ctx, path, &ns)
		return isStatus(last, 404), nil
	})
	if err != nil {
		var why []string
		for _, cond := range ns.Status.Conditions {
			if cond.Status == "True" {
				why = append(why, cond.Type+": "+cond.Message)
			}
		}
		if last != nil && !isStatus(last, 404) {
			why = append(why, "last answer: "+last.Error())
		}
		return fmt.Errorf("cluster %s: namespace %s still %s after %v: %s", c.name, name, ns.Status.Phase, namespaceDeleteTimeout, strings.Join(why, "; "))
	}
	return nil
}

// cleanNamespaces empties the cluster of what test runs made, when there
// is anything to remove.
func (c *Cluster) cleanNamespaces(ctx context.Context) error {
	if !c.cfg.kubernetes {
		return nil
	}
	if _, err := c.ControlPlane().run(ctx, bootstrap.CleanNamespacesCommand(adminKubeconfig)...); err != nil {
		return fmt.Errorf("clean namespaces: %w", err)
	}
	return nil
}
