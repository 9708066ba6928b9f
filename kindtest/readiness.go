package kindtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/poll"
)

// readinessCondition is one named condition of a ready cluster: met when
// check returns nil, else check's error says what the cluster shows.
type readinessCondition struct {
	name  string
	check func(ctx context.Context, c *Cluster, api *apiClient) error
}

// readiness is what ready means for a cluster as Start leaves it, in the
// order the conditions are waited for. The ready phase of creation
// (waitReady), WaitReady and reuse's check of a kept cluster (checkReady)
// all go by it; the names are those the log and errors show.
var readiness = []readinessCondition{
	{"API server ready", apiServerReady},
	{"nodes Ready", nodesReady},
	{"default service account", defaultServiceAccount},
	{"CoreDNS ready", coreDNSReady},
}

// apiServerReady is met once the API server answers its readiness check.
func apiServerReady(ctx context.Context, _ *Cluster, api *apiClient) error {
	return api.get(ctx, "/readyz", nil)
}

// nodesReady is met once every node of the cluster reports Ready.
func nodesReady(ctx context.Context, c *Cluster, api *apiClient) error {
	return c.everyNode(ctx, api, "not Ready", func(n node) bool {
		for _, cond := range n.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				return true
			}
		}
		return false
	})
}

// everyNode is met once every node of the cluster is registered and met
// says so of it; otherwise its error is what, followed by the nodes that
// are not.
func (c *Cluster) everyNode(ctx context.Context, api *apiClient, what string, met func(node) bool) error {
	var nodes nodeList
	if err := api.get(ctx, "/api/v1/nodes", &nodes); err != nil {
		return err
	}
	ok := map[string]bool{}
	for _, n := range nodes.Items {
		ok[n.Metadata.Name] = met(n)
	}
	var missing []string
	for _, n := range c.nodes {
		if !ok[n.name] {
			missing = append(missing, n.name)
		}
	}
	if len(missing) > 0 {
		return errors.New(what + ": " + strings.Join(missing, ", "))
	}
	return nil
}

// defaultServiceAccount is met once the default namespace's service
// account exists: pods there cannot be created before.
func defaultServiceAccount(ctx context.Context, _ *Cluster, api *apiClient) error {
	return api.get(ctx, "/api/v1/namespaces/default/serviceaccounts/default", nil)
}

// coreDNSReady is met once every replica CoreDNS wants is updated and
// ready.
func coreDNSReady(ctx context.Context, _ *Cluster, api *apiClient) error {
	var dns deployment
	if err := api.get(ctx, "/apis/apps/v1/namespaces/kube-system/deployments/coredns", &dns); err != nil {
		return err
	}
	want := 1
	if dns.Spec.Replicas != nil {
		want = *dns.Spec.Replicas
	}
	if dns.Status.ReadyReplicas < want || dns.Status.UpdatedReplicas < want {
		return fmt.Errorf("%d of %d replicas ready", dns.Status.ReadyReplicas, want)
	}
	return nil
}

// notReady returns the name of the first of conds not yet met, and why,
// or "" when all are.
func (c *Cluster) notReady(ctx context.Context, api *apiClient, conds []readinessCondition) (string, string) {
	for _, cond := range conds {
		if err := cond.check(ctx, c, api); err != nil {
			return cond.name, err.Error()
		}
	}
	return "", ""
}

// waitReady waits until every readiness condition is met: the ready
// phase of creation, and WaitReady.
func (c *Cluster) waitReady(ctx context.Context) error { return c.waitFor(ctx, readiness) }

// waitFor waits until every one of conds is met, logging how long each
// took. On timeout it says which condition failed and what the cluster
// showed then.
func (c *Cluster) waitFor(ctx context.Context, conds []readinessCondition) error {
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	pending := conds[0].name
	var detail string
	start, last := time.Now(), ""
	// A short cap: the last condition is seen met within 0.1 s; a poll is
	// a few GETs on one kept-alive connection.
	err = poll.Until(ctx, 50*time.Millisecond, 100*time.Millisecond, func() (bool, error) {
		pending, detail = c.notReady(ctx, api, conds)
		if pending != last {
			// Which conditions took how long is what tuning needs.
			if last != "" {
				c.log.Printf("kindtest: %s: %s after %v", c.name, last, time.Since(start).Round(time.Millisecond))
			}
			last = pending
		}
		return pending == "", nil
	})
	if err != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "waiting for %s", pending)
		if detail != "" {
			fmt.Fprintf(&b, ": %s", detail)
		}
		if d := c.podDiagnostics(api); d != "" {
			fmt.Fprintf(&b, "\n%s", d)
		}
		for _, n := range c.nodes {
			if d := c.kubeletDiagnostics(n); d != "" {
				fmt.Fprintf(&b, "\n%s", d)
			}
		}
		return fmt.Errorf("%s: %w", b.String(), err)
	}
	return nil
}

// WaitReady waits until the cluster is ready as Start leaves it: API
// server ready, every node Ready, the default service account present and
// CoreDNS ready, the conditions of Start's ready phase. It is for clusters made WithoutDefaultCNI, after the test
// has installed its CNI plugin, and after node restarts. On failure the
// error says which condition was not met and what the cluster showed.
func (c *Cluster) WaitReady(ctx context.Context) error {
	if !c.cfg.kubernetes {
		return errors.New("kindtest: wait ready: cluster " + c.name + " was made WithoutKubernetes")
	}
	if err := c.waitReady(ctx); err != nil {
		return fmt.Errorf("kindtest: cluster %s: not ready: %w", c.name, err)
	}
	return nil
}
