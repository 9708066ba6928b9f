// Reuse mode (WithReuse): attaching to an idle kept cluster of the same
// shape, and the lock that says a run is using it.

package kindtest

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/kindtest/kindtest/internal/flock"
)

// completeMarker is written on the control plane once a cluster is ready;
// a reusable cluster without it was left half-made.
const completeMarker = "/etc/kindtest/complete"

// reuseLock takes the lock that says a run is using the cluster, without
// waiting: ok is false when another run holds it. The kernel drops the
// lock when the process ends, however it ends, so a crashed run never
// keeps a cluster from being reused.
func reuseLock(cluster string) (*flock.Lock, bool, error) {
	return flock.TryLock(reuseLockPath(cluster))
}

// attachReusable attaches c to an idle, complete cluster of the same
// configuration, oldest first. Half-made ones (their creator died) are
// removed on the way.
func (c *Cluster) attachReusable(ctx context.Context) (bool, error) {
	start := time.Now()
	hash := c.labels[LabelReuse]
	cps, err := c.docker.ListContainers(ctx, map[string]string{LabelReuse: hash, LabelNodeIndex: "0"})
	if err != nil {
		return false, err
	}
	sort.Slice(cps, func(i, j int) bool { return cps[i].Labels[LabelCreated] < cps[j].Labels[LabelCreated] })
	for _, cp := range cps {
		name := cp.Labels[LabelCluster]
		lock, ok, err := reuseLock(name)
		if err != nil {
			return false, err
		}
		if !ok {
			c.log.Printf("kindtest: reusable cluster %s is in use by another run", name)
			continue
		}
		candidate := &Cluster{cfg: &config{}, docker: c.docker, log: c.log, access: access{workDir: c.workDir}}
		*candidate.cfg = *c.cfg
		err = candidate.attach(ctx, name)
		if err == nil {
			_, err = candidate.ControlPlane().run(ctx, "test", "-f", completeMarker)
		}
		if err == nil && candidate.cfg.kubernetes {
			err = candidate.checkReady(ctx)
		}
		if err == nil {
			err = candidate.cleanNamespaces(ctx)
		}
		if err != nil {
			c.log.Printf("kindtest: removing reusable cluster %s, unusable: %v", name, err)
			if rerr := removeCluster(ctx, c.docker, name); rerr != nil {
				lock.Unlock()
				return false, rerr
			}
			lock.Unlock()
			continue
		}
		// The handle takes this cluster's identity and access whole; the
		// name drawn for a new one is dropped.
		c.identity, c.access = candidate.identity, candidate.access
		for _, n := range c.nodes {
			n.cluster = c // for Stop and Start
		}
		c.life.mu.Lock()
		c.life.reuseLock = lock
		c.life.ready = true
		c.life.marked = true // its creator marked it kept when it was complete
		c.life.mu.Unlock()
		proc.register(c)
		c.log.Printf("kindtest: reusing cluster %s (attached in %v)", c.name, time.Since(start).Round(time.Millisecond))
		return true, nil
	}
	return false, nil
}

// checkReady fails unless the cluster meets every readiness condition now
// (see readiness).
func (c *Cluster) checkReady(ctx context.Context) error {
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	if pending, detail := c.notReady(ctx, api, readiness); pending != "" {
		return fmt.Errorf("not ready: %s: %s", pending, detail)
	}
	return nil
}
