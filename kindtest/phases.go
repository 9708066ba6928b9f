package kindtest

import (
	"context"
	"fmt"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/concurrent"
)

// Phase names one phase of cluster creation. The same name is in the
// progress log ("kindtest: NAME: boot done in 1.2s"), in Timings and in
// `kindtest bench`.
type Phase string

// The phases of creation, in the order they start. Every cluster goes
// through sweep to boot; with Kubernetes (the default) init and kubeconfig
// run beside boot, then the rest follow.
const (
	// PhaseSweep starts, once per process and in the background, the
	// removal of clusters whose owner is gone.
	PhaseSweep Phase = "sweep"
	// PhaseReaper registers the cluster with the engine's reaper (started
	// if none runs), before anything of the cluster exists.
	PhaseReaper Phase = "reaper"
	// PhaseNetwork creates the cluster's network.
	PhaseNetwork Phase = "network"
	// PhaseContainers creates and starts the node containers (their
	// entrypoint waits for the boot signal), the registry and the load
	// balancer.
	PhaseContainers Phase = "containers"
	// PhaseProvision prepares every node before systemd starts: /sys
	// read-only, cgroups, shared mounts, machine id, registry hosts, pod
	// network and DNS, and on the control plane kubeadm's files and the
	// add-on manifests.
	PhaseProvision Phase = "provision"
	// PhaseBoot sends the boot signal and waits until systemd runs on
	// every node.
	PhaseBoot Phase = "boot"
	// PhaseInit runs kubeadm init on the first control plane, beside boot.
	PhaseInit Phase = "init"
	// PhaseKubeconfig fetches the admin kubeconfig (written before boot)
	// and points it at the API server's published address, beside init.
	PhaseKubeconfig Phase = "kubeconfig"
	// PhaseJoin joins the workers and the other control planes; clusters
	// of one node skip it.
	PhaseJoin Phase = "join"
	// PhaseReady waits until the cluster is ready (see WaitReady).
	PhaseReady Phase = "ready"
	// PhaseAPIServer replaces PhaseReady WithoutDefaultCNI: it waits only
	// for the API server and for every node to register with its pod
	// range, the nodes' readiness waiting for the test's CNI plugin.
	PhaseAPIServer Phase = "api server"
	// PhaseLateAddons starts applying the storage provisioner and the
	// NetworkPolicy agent in the background; nothing waits for them.
	PhaseLateAddons Phase = "late add-ons"
)

// PhaseTiming is how long one phase of cluster creation took.
type PhaseTiming struct {
	Phase    Phase
	Duration time.Duration
}

// Timings returns how long each phase of creation took, in the order the
// phases ended.
func (c *Cluster) Timings() []PhaseTiming {
	c.timingsMu.Lock()
	defer c.timingsMu.Unlock()
	return append([]PhaseTiming(nil), c.timings...)
}

// phase runs one phase of creation, logging and recording its duration.
func (c *Cluster) phase(ctx context.Context, p Phase, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start)
	if err != nil {
		c.log.Printf("kindtest: %s: %s failed after %v", c.name, p, d.Round(time.Millisecond))
		return &phaseError{phase: p, err: err}
	}
	c.timingsMu.Lock()
	c.timings = append(c.timings, PhaseTiming{Phase: p, Duration: d})
	c.timingsMu.Unlock()
	c.log.Printf("kindtest: %s: %s done in %v", c.name, p, d.Round(time.Millisecond))
	return nil
}

// phaseError is the error of a phase of creation: the cause's own, with
// the phase for wrapCtx to name.
type phaseError struct {
	phase Phase
	err   error
}

func (e *phaseError) Error() string { return e.err.Error() }
func (e *phaseError) Unwrap() error { return e.err }

// create runs the whole lifecycle, phase by phase. Delete undoes any part
// of it.
//
// Before anything of the cluster exists, clusters left by processes that
// are gone are swept (once per process) and the cluster is registered with
// the process's reaper, so that from its first resource on a killed
// process leaves nothing behind.
func (c *Cluster) create(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.createTimeout, errCreateTimeout)
	defer cancel()
	c.newNodes()
	c.log.Printf("kindtest: creating cluster %s (%d node(s), image %s)", c.name, len(c.nodes), c.cfg.image)
	start := time.Now()

	_ = c.phase(ctx, PhaseSweep, c.sweep)
	_ = c.phase(ctx, PhaseReaper, c.registerWithReaper)
	if err := ctx.Err(); err != nil {
		return c.wrapCtx(ctx, &phaseError{phase: PhaseReaper, err: err})
	}
	if err := c.phase(ctx, PhaseNetwork, c.createNetwork); err != nil {
		return c.wrapCtx(ctx, fmt.Errorf("cluster %s: create network: %w", c.name, err))
	}
	if err := c.phase(ctx, PhaseContainers, c.createContainers); err != nil {
		return c.wrapCtx(ctx, err)
	}
	if err := c.phase(ctx, PhaseProvision, c.provision); err != nil {
		return c.wrapCtx(ctx, err)
	}
	if !c.cfg.kubernetes {
		if err := c.phase(ctx, PhaseBoot, c.boot); err != nil {
			return c.wrapCtx(ctx, err)
		}
	} else if err := c.setupKubernetes(ctx); err != nil {
		return c.wrapCtx(ctx, err)
	}
	c.log.Printf("kindtest: cluster %s ready in %v", c.name, time.Since(start).Round(time.Millisecond))
	return nil
}

// setupKubernetes runs the phases that turn provisioned nodes into a
// Kubernetes cluster, boot and init side by side, and waits until it is
// really ready.
func (c *Cluster) setupKubernetes(ctx context.Context) error {
	if err := c.bootAndInit(ctx); err != nil {
		return err
	}
	if len(c.nodes) > 1 {
		if err := c.phase(ctx, PhaseJoin, c.join); err != nil {
			return err
		}
	}
	if c.cfg.noDefaultCNI {
		// The user's CNI makes the nodes Ready; WaitReady waits for it.
		if err := c.phase(ctx, PhaseAPIServer, c.waitAPIServer); err != nil {
			return err
		}
	} else if err := c.phase(ctx, PhaseReady, c.waitReady); err != nil {
		return err
	}
	if c.cfg.withoutStorage && !c.cfg.networkPolicyEnforced() {
		return nil
	}
	return c.phase(ctx, PhaseLateAddons, c.startLateAddons)
}

// sweep is the sweep phase: it starts the removal of orphaned clusters and
// returns at once (see sweepOrphans).
func (c *Cluster) sweep(context.Context) error {
	sweepOrphans()
	return nil
}

// registerWithReaper is the reaper phase: the cluster is registered with
// the process's reaper (see watch), then with the process's own list of
// live clusters, for signals and the test binary's deadline. Without a
// reaper creation goes on, as watch logs.
func (c *Cluster) registerWithReaper(ctx context.Context) error {
	c.watch(ctx)
	register(c)
	return nil
}

// createNetwork is the network phase. What the nodes' cgroups look like
// decides how they are created; the engine says while the network is
// being made. Engine objects are created on a context that is not
// cancelled mid-request (see settled): an abandoned request is still
// carried out by the engine, after the cleanup that should have removed
// its result.
func (c *Cluster) createNetwork(ctx context.Context) error {
	g, ctx := concurrent.WithContext(ctx)
	g.Go(func() error {
		sctx, cancel := c.settled(ctx)
		defer cancel()
		if _, err := c.docker.CreateNetwork(sctx, c.name, c.labels); err != nil {
			return err
		}
		return c.place.joinNetwork(sctx, c.docker, c.name)
	})
	g.Go(func() error {
		info, err := c.docker.Info(ctx)
		for _, n := range c.nodes {
			n.cgroupV2 = info.CgroupVersion == "2"
		}
		return err
	})
	return g.Wait()
}

// createContainers is the containers phase: every node's volume and
// container (see createNode), the registry (WithRegistry) and the load
// balancer (WithControlPlanes(>1)), side by side; the first failure stops
// the rest.
func (c *Cluster) createContainers(ctx context.Context) error {
	g, ctx := concurrent.WithContext(ctx)
	for _, n := range c.nodes {
		g.Go(func() error { return c.createNode(ctx, n) })
	}
	g.Go(func() error { return c.startRegistry(ctx) })     // WithRegistry; nothing otherwise
	g.Go(func() error { return c.startLoadBalancer(ctx) }) // WithControlPlanes(>1); nothing otherwise
	return g.Wait()
}

// provision is the provision phase: every node is prepared for boot, side
// by side (see provisionNode); the first failure stops the rest.
func (c *Cluster) provision(ctx context.Context) error {
	return concurrent.All(ctx, len(c.nodes), func(ctx context.Context, i int) error { return c.provisionNode(ctx, c.nodes[i]) })
}

// provisionNode prepares node n before systemd starts, in one exec, in
// the order the steps must run: the node itself (the provision script:
// read-only /sys, cgroups, shared mounts, machine id), containerd's
// registry hosts, then its pod network and DNS; then, on the first
// control plane, kubeadm's files (see prepareControlPlane).
func (c *Cluster) provisionNode(ctx context.Context, n *Node) error {
	steps := [][]string{bootstrap.ProvisionCommand("")}
	if cmd := c.registryHostsCommand(n); cmd != nil {
		steps = append(steps, cmd)
	}
	if c.cfg.kubernetes {
		steps = append(steps, nodeNetworkCommand(c, n))
	}
	if _, err := n.run(ctx, bootstrap.Chain(steps...)...); err != nil {
		return c.nodeError(n, "provision before boot", err)
	}
	if c.cfg.kubernetes && n.index == 0 {
		// The other control planes get the shared certificates from it
		// when they join (see joinControlPlane).
		return c.prepareControlPlane(ctx, n)
	}
	return nil
}

// boot is the boot phase: every node is booted side by side (see
// bootNode); the first failure stops the rest.
func (c *Cluster) boot(ctx context.Context) error {
	return concurrent.All(ctx, len(c.nodes), func(ctx context.Context, i int) error { return c.bootNode(ctx, c.nodes[i]) })
}

// bootAndInit runs the boot phase, the init phase and the kubeconfig
// phase side by side: kubeadm init starts as soon as the boot signals are
// sent, while boot waits for systemd on every node, since init's first
// step waits for the API server anyway; the admin kubeconfig was written
// before boot. A failed boot cancels the others and is the error
// reported; a failed init lets boot finish, whose failure would say more.
func (c *Cluster) bootAndInit(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	initErr := make(chan error, 1)
	go func() {
		initErr <- concurrent.All(ctx, 2, func(ctx context.Context, i int) error {
			if i == 0 {
				return c.phase(ctx, PhaseInit, func(ctx context.Context) error { return c.kubeadmInit(ctx, c.ControlPlane()) })
			}
			return c.phase(ctx, PhaseKubeconfig, c.fetchKubeconfig)
		})
	}()
	if err := c.phase(ctx, PhaseBoot, c.boot); err != nil {
		cancel()
		<-initErr
		return err
	}
	return <-initErr
}

// join is the join phase, after init: the other nodes join the cluster
// (see kubeadmJoin). Workers join side by
// side; control planes one after the other, beside them: each adds an
// etcd member, and etcd takes one new member at a time. The first failure
// stops the rest.
//
// Joining beside init, as soon as its bootstrap-token phase was done, was
// measured slower: on two cores the workers' kubeadm and kubelets took
// the CPU the scheduler and CoreDNS needed at that moment.
func (c *Cluster) join(ctx context.Context) error {
	g, ctx := concurrent.WithContext(ctx)
	for _, n := range c.Workers() {
		g.Go(func() error { return c.kubeadmJoin(ctx, n) })
	}
	g.Go(func() error {
		for _, n := range c.ControlPlanes()[1:] {
			if err := c.joinControlPlane(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}
