// Claiming a ready cluster from a pool (KINDTEST_POOL, see NewPool): the
// claim record that makes it atomic and moves ownership, and the claimer's
// checks before it uses the cluster.

package kindtest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// rolePoolReady is the role of the volume a pool creates once a cluster of
// it is ready: claimers look for these.
const rolePoolReady = "pool-ready"

// claimPoll is how often a claimer looks again while the pool's clusters
// of its shape are still being made.
const claimPoll = 100 * time.Millisecond

// createClaim creates the claim record of cluster: a container never
// started, named after the cluster, with the claimer's labels (see
// lifetime.RoleClaim). ok is false when another process claimed it first:
// the engine refuses a second container of that name, whatever the race.
func createClaim(ctx context.Context, dc *docker.Client, cluster, pool, image string, labels map[string]string) (bool, error) {
	l := make(map[string]string, len(labels)+3)
	for k, v := range labels {
		l[k] = v
	}
	l[LabelCluster], l[LabelRole], l[LabelPool] = cluster, RoleClaim, pool
	_, err := dc.CreateContainer(ctx, docker.ContainerSpec{
		Name:       claimName(cluster),
		Image:      image,
		Labels:     l,
		Entrypoint: []string{"/bin/false"}, // never started
	})
	if docker.IsConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim cluster %s: %w", cluster, err)
	}
	return true, nil
}

// claim gives c a ready cluster of its shape from pool, waiting while the
// pool is still making one. ok is false when there is none to claim, the
// log says why, and c is left as it was, to create one cold.
func (c *Cluster) claim(ctx context.Context, pool string) (bool, error) {
	start := time.Now()
	// After a race lost to another claimer, the pool is given a moment
	// to notice the claim and start a replacement, which is waited for.
	var grace time.Time
	for {
		readies, err := c.docker.ListVolumes(ctx, map[string]string{LabelPool: pool, LabelRole: rolePoolReady})
		if err != nil {
			return false, fmt.Errorf("pool %s: %w", pool, err)
		}
		claims, err := c.docker.ListContainers(ctx, map[string]string{LabelPool: pool, LabelRole: RoleClaim})
		if err != nil {
			return false, fmt.Errorf("pool %s: %w", pool, err)
		}
		claimed := map[string]bool{}
		for _, cl := range claims {
			claimed[cl.Labels[LabelCluster]] = true
		}
		ready := map[string]bool{}
		var candidates []map[string]string
		var shapes []string
		for _, v := range readies {
			l := v.Labels
			ready[l[LabelCluster]] = true
			if claimed[l[LabelCluster]] {
				continue
			}
			if l[LabelShape] != c.shape {
				shapes = append(shapes, l[LabelShape])
				continue
			}
			candidates = append(candidates, l)
		}
		sort.Slice(candidates, func(i, j int) bool { return candidates[i][LabelCreated] < candidates[j][LabelCreated] })
		for _, l := range candidates {
			if !ownerAlive(ownerFromLabels(l)) {
				c.log.Printf("kindtest: pool %s (KINDTEST_POOL): its process (pid %s) is gone; creating cluster %s cold", pool, l[LabelOwnerPID], c.name)
				return false, nil
			}
			ok, err := c.claimOne(ctx, pool, l, start)
			if err != nil || ok {
				return ok, err
			}
			grace = time.Now().Add(time.Second + 2*poolWatch)
		}
		// None ready to claim: wait if the pool is making one of this
		// shape, else say why there is none.
		// Each cluster's network is the first object made of it.
		nets, err := c.docker.ListNetworks(ctx, map[string]string{LabelPool: pool})
		if err != nil {
			return false, fmt.Errorf("pool %s: %w", pool, err)
		}
		making, alive := 0, false
		for _, n := range nets {
			l := n.Labels
			if ownerAlive(ownerFromLabels(l)) {
				alive = true
			}
			if l[LabelShape] == c.shape && !ready[l[LabelCluster]] && !claimed[l[LabelCluster]] {
				making++
			} else if l[LabelShape] != c.shape {
				shapes = append(shapes, l[LabelShape])
			}
		}
		switch {
		case len(nets) == 0:
			c.log.Printf("kindtest: pool %s (KINDTEST_POOL) has no cluster on the engine at %s (has it ended?); creating cluster %s cold", pool, c.docker.Host(), c.name)
			return false, nil
		case !alive:
			c.log.Printf("kindtest: pool %s (KINDTEST_POOL): its process is gone; creating cluster %s cold", pool, c.name)
			return false, nil
		case making > 0 && time.Since(start) > c.cfg.createTimeout:
			c.log.Printf("kindtest: pool %s (KINDTEST_POOL): no cluster of this shape came free in %v (other processes claimed each one); creating cluster %s cold", pool, c.cfg.createTimeout, c.name)
			return false, nil
		case making > 0, alive && time.Now().Before(grace):
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(claimPoll):
			}
			continue
		case len(shapes) > 0 && !hasShape(nets, c.shape):
			c.log.Printf("kindtest: pool %s (KINDTEST_POOL) makes clusters of shape %s, not of this one's (%s): their options differ (workers, control planes, image, settings...); creating cluster %s cold", pool, strings.Join(slices.Compact(slices.Sorted(slices.Values(shapes))), ", "), c.shape, c.name)
			return false, nil
		default:
			c.log.Printf("kindtest: pool %s (KINDTEST_POOL): every cluster of this shape is claimed (%d claims) and none is being made; creating cluster %s cold", pool, len(claims), c.name)
			return false, nil
		}
	}
}

func hasShape(nets []docker.Network, shape string) bool {
	for _, n := range nets {
		if n.Labels[LabelShape] == shape {
			return true
		}
	}
	return false
}

// claimOne claims the ready cluster whose pool-ready volume carries
// labels ready. ok is false when another process claimed it first, or when
// it turned out unusable (then it is removed).
//
// The order makes every death safe. The cluster is registered with this
// process's reaper before the claim record exists, so that from the
// record's creation on a killed claimer's reaper removes it all. After the
// record exists, the pool's reaper leaves it alone; a pool seen alive then
// had not died before, so no removal of its clusters can have begun.
func (c *Cluster) claimOne(ctx context.Context, pool string, ready map[string]string, start time.Time) (bool, error) {
	name := ready[LabelCluster]
	mine := clusterLabels(name, time.Now(), c.labels[LabelKeep])
	old := c.identity
	c.identity = identity{name: name, labels: mine, shape: c.shape}
	undo := func() {
		c.unwatch()
		c.identity = old
	}
	t0 := time.Now()
	c.watch(ctx)
	ok, err := createClaim(ctx, c.docker, name, pool, c.cfg.image, mine)
	claimed := time.Since(t0)
	if err != nil || !ok {
		undo()
		return false, err
	}
	fail := func(why string, err error) (bool, error) {
		c.log.Printf("kindtest: cluster %s claimed from pool %s is unusable (%s: %v); removing it", name, pool, why, err)
		rerr := removeCluster(ctx, c.docker, name)
		undo()
		return false, rerr
	}
	if !ownerAlive(ownerFromLabels(ready)) {
		return fail("the pool's process is gone", fmt.Errorf("pid %s", ready[LabelOwnerPID]))
	}
	candidate := &Cluster{cfg: &config{}, docker: c.docker, log: c.log, access: access{workDir: c.workDir}}
	*candidate.cfg = *c.cfg
	// Of this shape, so made with this process's options: only the
	// nodes and the kubeconfig are to be found.
	t1 := time.Now()
	if err := candidate.attachNodes(ctx, name); err != nil {
		return fail("attach", err)
	}
	candidate.cfg.kubernetes, candidate.cfg.noDefaultCNI = c.cfg.kubernetes, c.cfg.noDefaultCNI
	if candidate.cfg.kubernetes {
		if err := candidate.fetchKubeconfig(ctx, nil); err != nil {
			return fail("kubeconfig", err)
		}
	}
	t2 := time.Now()
	if candidate.cfg.kubernetes {
		if err := candidate.checkReady(ctx); err != nil {
			return fail("readiness", err)
		}
	}
	// The handle takes the cluster's nodes and access; its labels stay
	// this process's: what it creates from now on is its own.
	candidate.identity.labels, candidate.identity.shape = mine, c.shape
	c.identity, c.access = candidate.identity, candidate.access
	for _, n := range c.nodes {
		n.cluster = c
	}
	c.life.mu.Lock()
	c.life.ready = true
	c.life.mu.Unlock()
	proc.register(c)
	c.log.Printf("kindtest: claimed cluster %s from pool %s in %v (finding it %v, the claim %v, attaching %v, readiness %v)", name, pool,
		time.Since(start).Round(time.Millisecond), t0.Sub(start).Round(time.Millisecond), claimed.Round(time.Millisecond),
		t2.Sub(t1).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	return true, nil
}
