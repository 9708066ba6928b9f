package kindtest

import "context"

// setupKubernetes turns booted nodes into a Kubernetes cluster.
func (c *Cluster) setupKubernetes(ctx context.Context) error {
	return nil
}
