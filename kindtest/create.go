// The creation of a cluster, in the order it runs: New (or Start),
// prepare (options, engine, node image, sidecar images, all before
// anything exists), setup (reuse an idle cluster, or create one), create
// and its phases.

package kindtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// New creates a cluster and returns once it is ready: every node booted
// and, unless WithoutKubernetes is given, Kubernetes up with every node and
// CoreDNS Ready. On failure everything created so far is removed (unless
// the keep policy keeps clusters whose creation failed: KeepOnFailure and
// KeepAlways) and the error says which node and step failed. The caller
// must Delete the cluster, or Close the handle to leave it in place.
func New(ctx context.Context, opts ...Option) (*Cluster, error) {
	c, cr, err := prepare(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.setup(ctx, cr); err != nil {
		err = fmt.Errorf("kindtest: cluster %s: %w", c.name, err)
		// A context that ended is no sign of the engine's health: its end
		// is named as such (see wrapCtx), unless the engine does not
		// answer now either. A request cut off by kindtest's own causes
		// (the create timeout, the test's deadline) reads to the SDK as a
		// failed connection, so only a ping decides then.
		ended := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
			errors.Is(err, errCreateTimeout) || errors.Is(err, errTestDeadline)
		hung := ended && !c.docker.Answers()
		endErr := c.end(context.Background(), lifetime.Failed)
		if hung || (!ended && docker.IsUnreachable(err)) || docker.IsUnreachable(endErr) {
			err = fmt.Errorf("%w\nkindtest: the engine at %s stopped answering while cluster %s was being made: what was made there stays until the engine answers again; then its reaper (once this process's connection to it drops), the next Start that reaches the engine, or `kindtest prune` removes it", err, c.docker.Host(), c.name)
		}
		return nil, errors.Join(err, endErr)
	}
	return c, nil
}

// prepare validates options, connects to the engine and checks the image,
// all before anything is created, and names the cluster.
func prepare(ctx context.Context, opts []Option) (*Cluster, *creation, error) {
	cfg, dc, err := connect(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	img, err := nodeImage(ctx, dc, cfg.image, cfg.logger)
	if err != nil {
		dc.Close()
		return nil, nil, err
	}
	engine, err := dc.Info(ctx)
	if err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("kindtest: %w", err)
	}
	if err := checkPlatform(img, engine, cfg.image, dc.Host()); err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("kindtest: %w", err)
	}
	place, err := detectPlacement(ctx, dc)
	if err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("kindtest: %w", err)
	}
	var host rootlessHost
	if place.kind == placementLocal {
		host = localHost()
	}
	if err := checkRootless(engine, dc.Host(), cfg.hostPorts(), host, cfg.logger); err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("kindtest: %w", err)
	}
	version := lifetime.ImageKubernetesVersion(img.Labels)
	if version == "" {
		version = KubernetesVersion
	}
	// What the options could not check before the image and the engine's
	// place were known, still before anything is created.
	var errs []error
	if err := cfg.settings.checkVersion(cfg.image, version); err != nil {
		errs = append(errs, err)
	}
	if place.kind == placementLocal {
		// Elsewhere host paths are on the engine's host, out of reach.
		if err := cfg.settings.checkMountSources(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		dc.Close()
		return nil, nil, fmt.Errorf("kindtest: invalid options: %w", err)
	}
	for _, s := range sidecars {
		if !s.wanted(cfg) {
			continue
		}
		if err := s.ensureImage(ctx, dc, cfg.image, cfg.logger); err != nil {
			dc.Close()
			return nil, nil, fmt.Errorf("kindtest: %w", err)
		}
	}
	if cfg.loadBalancers() {
		// Not asked for by name: without the image the cluster is still
		// made, and LoadBalancer Services get no address.
		if err := serviceLBImage.ensureImage(ctx, dc, cfg.image, cfg.logger); err != nil {
			cfg.logger.Printf("kindtest: %v: LoadBalancer Services will get no address (WithoutLoadBalancer says so quietly)", err)
		}
	}
	now := time.Now()
	name := newClusterName(cfg.prefix)
	keep := cfg.keep.String()
	if cfg.reuse {
		keep = lifetime.KeepReuse
	}
	labels := clusterLabels(name, now, keep)
	hash := reuseHash(cfg, img.ID)
	if cfg.reuse {
		labels[LabelReuse] = hash
	}
	if cfg.pool != "" {
		labels[LabelPool], labels[LabelShape] = cfg.pool, hash
	}
	c := &Cluster{
		cfg:      cfg,
		docker:   dc,
		log:      cfg.logger,
		place:    place,
		identity: identity{name: name, labels: labels, shape: hash},
	}
	return c, &creation{kubernetesVersion: version, cgroupV2: engine.CgroupVersion == "2", rootless: engine.Rootless}, nil
}

// setup gives c a ready cluster: under a pool (KINDTEST_POOL) one claimed
// from it if it has one of the same shape, in reuse mode an idle one of
// the same shape if there is one, else a new one.
func (c *Cluster) setup(ctx context.Context, cr *creation) error {
	if pool := getenv(envPool); pool != "" && c.cfg.pool == "" && !c.cfg.reuse {
		ok, err := c.claim(ctx, pool)
		if err != nil {
			return err
		}
		if ok {
			c.startServiceLBs()
			return nil
		}
	}
	if c.cfg.reuse {
		ok, err := c.attachReusable(ctx)
		if err != nil {
			return err
		}
		if ok {
			c.startServiceLBs()
			return nil
		}
		lock, ok, err := reuseLock(c.name)
		if err != nil {
			return fmt.Errorf("reuse lock: %w", err)
		}
		if !ok {
			// The name is new and random: another holder means a bug.
			return fmt.Errorf("reuse lock %s is held by another process", reuseLockPath(c.name))
		}
		c.life.mu.Lock()
		c.life.reuseLock = lock
		c.life.mu.Unlock()
	}
	err := c.create(ctx, cr)
	c.timings = cr.timings
	if err != nil {
		return err
	}
	if c.cfg.reuse {
		if _, err := c.ControlPlane().sh(ctx, "mkdir -p /etc/kindtest && touch "+completeMarker); err != nil {
			return err
		}
		// Complete: from now on it outlives this process.
		if err := c.markKept(ctx); err != nil {
			return err
		}
	}
	c.life.mu.Lock()
	c.life.ready = true
	c.life.mu.Unlock()
	c.startServiceLBs()
	return nil
}

// phase runs one phase of creation, logging and recording its duration.
func (c *Cluster) phase(ctx context.Context, cr *creation, p Phase, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	d := time.Since(start)
	if err != nil {
		c.log.Printf("kindtest: %s: %s failed after %v", c.name, p, d.Round(time.Millisecond))
		return &phaseError{phase: p, err: err}
	}
	cr.timingsMu.Lock()
	cr.timings = append(cr.timings, PhaseTiming{Phase: p, Duration: d})
	cr.timingsMu.Unlock()
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
func (c *Cluster) create(ctx context.Context, cr *creation) error {
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.createTimeout, errCreateTimeout)
	defer cancel()
	c.newNodes()
	for _, n := range c.nodes {
		n.cgroupV2 = cr.cgroupV2
	}
	c.log.Printf("kindtest: creating cluster %s (%d node(s), image %s)", c.name, len(c.nodes), c.cfg.image)
	start := time.Now()

	_ = c.phase(ctx, cr, PhaseSweep, c.sweep)
	_ = c.phase(ctx, cr, PhaseReaper, c.registerWithReaper)
	if err := ctx.Err(); err != nil {
		return c.wrapCtx(ctx, &phaseError{phase: PhaseReaper, err: err})
	}
	if err := c.phase(ctx, cr, PhaseNetwork, c.createNetwork); err != nil {
		return c.wrapCtx(ctx, fmt.Errorf("create network: %w", err))
	}
	if err := c.phase(ctx, cr, PhaseContainers, c.createContainers); err != nil {
		return c.wrapCtx(ctx, err)
	}
	if err := c.phase(ctx, cr, PhaseProvision, func(ctx context.Context) error { return c.provision(ctx, cr) }); err != nil {
		return c.wrapCtx(ctx, err)
	}
	if !c.cfg.kubernetes {
		if err := c.phase(ctx, cr, PhaseBoot, c.boot); err != nil {
			return c.wrapCtx(ctx, err)
		}
	} else if err := c.setupKubernetes(ctx, cr); err != nil {
		return c.wrapCtx(ctx, err)
	}
	c.log.Printf("kindtest: cluster %s ready in %v", c.name, time.Since(start).Round(time.Millisecond))
	return nil
}

// setupKubernetes runs the phases that turn provisioned nodes into a
// Kubernetes cluster, boot and init side by side, and waits until it is
// really ready.
func (c *Cluster) setupKubernetes(ctx context.Context, cr *creation) error {
	if err := c.bootAndInit(ctx, cr); err != nil {
		return err
	}
	if len(c.nodes) > 1 {
		if err := c.phase(ctx, cr, PhaseJoin, func(ctx context.Context) error { return c.join(ctx, cr) }); err != nil {
			return err
		}
	}
	if c.cfg.noDefaultCNI {
		// The user's CNI makes the nodes Ready; WaitReady waits for it.
		if err := c.phase(ctx, cr, PhaseAPIServer, c.waitAPIServer); err != nil {
			return err
		}
	} else if err := c.phase(ctx, cr, PhaseReady, c.waitReady); err != nil {
		return err
	}
	if c.cfg.withoutStorage && !c.cfg.networkPolicyEnforced() {
		return nil
	}
	return c.phase(ctx, cr, PhaseLateAddons, c.startLateAddons)
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
	proc.register(c)
	return nil
}

// createNetwork is the network phase. Engine objects are created on a
// context that is not cancelled mid-request (see settled): an abandoned
// request is still carried out by the engine, after the cleanup that
// should have removed its result.
func (c *Cluster) createNetwork(ctx context.Context) error {
	sctx, cancel := settled(ctx, c.cfg.createTimeout)
	defer cancel()
	var v6 netip.Prefix
	if c.cfg.hasIPv6() {
		v6 = nodeNetwork6(append(c.cfg.podRanges(), c.cfg.serviceRanges()...)...)
	}
	if _, err := c.docker.CreateNetwork(sctx, c.name, c.labels, v6); err != nil {
		if v6.IsValid() {
			return fmt.Errorf("%w: WithIPFamily(%s) needs an IPv6 network (%s): %s", err, c.cfg.family(), v6, ipv6EngineHint)
		}
		return err
	}
	return c.place.joinNetwork(sctx, c.docker, c.name)
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
	for _, s := range sidecars {
		if s.wanted(c.cfg) {
			g.Go(func() error { return c.startSidecar(ctx, s) })
		}
	}
	return g.Wait()
}

// createNode creates the node's volume and container and starts it: its
// entrypoint waits for the boot signal, for provisionNode to run first.
func (c *Cluster) createNode(ctx context.Context, n *Node) error {
	labels := nodeLabels(c.labels, n.role, n.index)
	varVolume := varVolumeName(n.name)
	// Creation requests run to their end whatever happens to ctx (see
	// settled); ctx is checked between them.
	sctx, cancel := settled(ctx, c.cfg.createTimeout)
	defer cancel()
	if err := c.docker.CreateVolume(sctx, varVolume, labels); err != nil {
		return &NodeError{Node: n.name, Step: "create /var volume", Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &NodeError{Node: n.name, Step: "create container", Err: err}
	}
	spec := docker.ContainerSpec{
		Name:       n.name,
		Hostname:   n.name,
		Image:      c.cfg.image,
		Labels:     labels,
		Tty:        true, // without a terminal systemd exits at once
		Privileged: true,
		Tmpfs:      map[string]string{"/tmp": "", "/run": ""},
		// containerd's overlayfs snapshotter cannot stack on the container's
		// own overlay root, so /var is a volume.
		Volumes: map[string]string{varVolume: "/var"},
		Binds:   append([]string{"/lib/modules:/lib/modules:ro"}, c.cfg.settings.binds(n.index)...),
		Network: c.name,
		Runtime: c.cfg.runtime,
	}
	if n.index == 0 {
		if !c.ha() {
			// With several control planes the load balancer is published.
			spec.Ports = []docker.PortBinding{{HostIP: c.place.publishIP, ContainerPort: apiServerPort}}
		}
		spec.Ports = append(spec.Ports, c.portBindings()...)
	}
	if n.cgroupV2 {
		// The node's own cgroup becomes the root of what it sees, whatever
		// the engine's default (dockerd --default-cgroupns-mode=host too):
		// systemd in the node manages that tree and nothing of the host's.
		// Engines on cgroup v2 hosts (20.10 and later) all support it.
		spec.CgroupnsMode = "private"
	}
	id, err := c.docker.CreateContainer(sctx, spec)
	if err != nil {
		return &NodeError{Node: n.name, Step: "create container", Err: err}
	}
	n.id = id
	if err := ctx.Err(); err != nil {
		return &NodeError{Node: n.name, Step: "start container", Err: err}
	}
	if err := c.docker.StartContainer(sctx, id); err != nil {
		return &NodeError{Node: n.name, Step: "start container", Err: err, Diagnostics: c.startHint(n)}
	}
	info, err := c.docker.InspectContainer(ctx, id)
	if err != nil {
		return c.nodeError(n, "inspect container", err)
	}
	n.ip, n.ip6 = info.IPs[c.name], info.IPv6s[c.name]
	if c.cfg.hasIPv6() && n.ip6 == "" {
		return &NodeError{Node: n.name, Step: "inspect container", Err: fmt.Errorf("the engine gave the node no IPv6 address on network %s, which WithIPFamily(%s) needs: %s", c.name, c.cfg.family(), ipv6EngineHint)}
	}
	if n.index == 0 {
		if err := c.checkNodeSubnet(info.Subnets[c.name]); err != nil {
			return &NodeError{Node: n.name, Step: "check the network's range", Err: err}
		}
		if !c.ha() {
			c.apiServer = c.place.apiServerURL(c.name, info)
		}
		c.ports = info.Ports
	}
	return nil
}

// provision is the provision phase: every node is prepared for boot, side
// by side (see provisionNode); the first failure stops the rest.
func (c *Cluster) provision(ctx context.Context, cr *creation) error {
	return concurrent.All(ctx, len(c.nodes), func(ctx context.Context, i int) error { return c.provisionNode(ctx, cr, c.nodes[i]) })
}

// provisionNode prepares node n before systemd starts, in one exec, in
// the order the steps must run: the node itself (the provision script:
// read-only /sys, cgroups, shared mounts, machine id), containerd's
// registry hosts, then its pod network and DNS; then, on the first
// control plane, kubeadm's files (see prepareControlPlane).
func (c *Cluster) provisionNode(ctx context.Context, cr *creation, n *Node) error {
	steps := [][]string{bootstrap.ProvisionCommand("")}
	if cmd := c.proxyEnvCommand(); cmd != nil {
		steps = append(steps, cmd)
	}
	if cmd := c.registryHostsCommand(n); cmd != nil {
		steps = append(steps, cmd)
	}
	if c.cfg.kubernetes {
		steps = append(steps, nodeNetworkCommand(c, n))
	}
	out, err := n.run(ctx, bootstrap.Chain(steps...)...)
	if err != nil {
		return c.nodeError(n, "provision before boot", err)
	}
	if adj, ok := bootstrap.KubeletOOMScoreAdj(out); ok {
		n.oomScoreAdj = &adj
	}
	if c.cfg.kubernetes && n.index == 0 {
		if err := c.checkKubeProxyMode(ctx, n); err != nil {
			return err
		}
		// The other control planes get the shared certificates from it
		// when they join (see joinControlPlane).
		return c.prepareControlPlane(ctx, cr, n)
	}
	return nil
}

// checkNodeSubnet refuses a nodes' network (the engine picked its range)
// that overlaps the pod or Service range: traffic to one would go to the
// other.
func (c *Cluster) checkNodeSubnet(nodes netip.Prefix) error {
	if !c.cfg.kubernetes {
		return nil
	}
	for _, r := range []struct {
		what, option string
		ranges       []netip.Prefix
	}{{"pod", "WithPodSubnet", c.cfg.podRanges()}, {"Service", "WithServiceSubnet", c.cfg.serviceRanges()}} {
		for _, p := range r.ranges {
			if nodes.IsValid() && p.Overlaps(nodes) {
				return fmt.Errorf("the engine gave the nodes' network %s the range %s, which overlaps the %s subnet %s: choose another %s subnet with %s, or change the engine's default-address-pools", c.name, nodes, r.what, p, r.what, r.option)
			}
		}
	}
	return nil
}

// checkKubeProxyMode refuses IPVS mode, before boot, when the kernel of
// the engine's host has no IPVS: a node container cannot load the
// modules, and kube-proxy would only fall over later.
func (c *Cluster) checkKubeProxyMode(ctx context.Context, n *Node) error {
	if c.cfg.proxyMode() != KubeProxyIPVS {
		return nil
	}
	if _, err := n.run(ctx, "test", "-e", "/proc/net/ip_vs"); err != nil {
		var exit *ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("kube-proxy mode ipvs: the kernel of the engine's host has no IPVS (node %s has no /proc/net/ip_vs), and a node container cannot load kernel modules: load them on the engine's host (modprobe -a ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh), or use KubeProxyIPTables or KubeProxyNFTables", n.name)
		}
		return c.nodeError(n, "check for IPVS", err)
	}
	return nil
}

// boot is the boot phase: every node is booted side by side (see
// bootNode); the first failure stops the rest.
func (c *Cluster) boot(ctx context.Context) error {
	return concurrent.All(ctx, len(c.nodes), func(ctx context.Context, i int) error { return c.bootNode(ctx, c.nodes[i]) })
}

// bootNode sends the boot signal and waits until systemd reports the
// system running (or degraded: a unit failed, which diagnostics will show
// if it matters).
func (c *Cluster) bootNode(ctx context.Context, n *Node) error {
	if err := c.docker.KillContainer(ctx, n.id, "SIGUSR1"); err != nil {
		return c.nodeError(n, "send boot signal", err)
	}
	// The wait is in the node (see wait-systemd.sh); the exec also ends
	// when the container stops, or with ctx.
	_, err := n.run(ctx, bootstrap.WaitSystemdCommand()...)
	if err != nil && ctx.Err() == nil {
		if info, ierr := c.docker.InspectContainer(ctx, n.id); ierr != nil {
			err = fmt.Errorf("node container cannot be inspected (%v): %w", ierr, err)
		} else if !info.Running {
			err = fmt.Errorf("node container is %s (exit code %d): %w", info.Status, info.ExitCode, err)
		}
	}
	if err != nil {
		return c.nodeError(n, "wait for systemd", err)
	}
	return nil
}

// bootAndInit runs the boot phase, the init phase and the kubeconfig
// phase side by side: kubeadm init starts as soon as the boot signals are
// sent, while boot waits for systemd on every node, since init's first
// step waits for the API server anyway; the admin kubeconfig was written
// before boot. A failed boot cancels the others and is the error
// reported; a failed init lets boot finish, whose failure would say more.
func (c *Cluster) bootAndInit(ctx context.Context, cr *creation) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	initErr := make(chan error, 1)
	go func() {
		initErr <- concurrent.All(ctx, 2, func(ctx context.Context, i int) error {
			if i == 0 {
				return c.phase(ctx, cr, PhaseInit, func(ctx context.Context) error { return c.kubeadmInit(ctx, cr, c.ControlPlane()) })
			}
			return c.phase(ctx, cr, PhaseKubeconfig, func(ctx context.Context) error { return c.fetchKubeconfig(ctx, cr.prebootFiles) })
		})
	}()
	if err := c.phase(ctx, cr, PhaseBoot, c.boot); err != nil {
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
func (c *Cluster) join(ctx context.Context, cr *creation) error {
	g, ctx := concurrent.WithContext(ctx)
	for _, n := range c.Workers() {
		g.Go(func() error { return c.kubeadmJoin(ctx, cr, n) })
	}
	g.Go(func() error {
		for _, n := range c.ControlPlanes()[1:] {
			if err := c.joinControlPlane(ctx, cr, n); err != nil {
				return err
			}
		}
		return nil
	})
	return g.Wait()
}

// The causes (context.Cause) of a creation's context that kindtest ends
// itself: the create timeout (see create) and, under Start, the test
// binary's deadline less cleanupMargin.
var (
	errCreateTimeout = errors.New("the create timeout passed")
	errTestDeadline  = errors.New("the test binary's deadline came")
)

// wrapCtx makes a failure caused by a context that ended say so plainly:
// whose deadline or cancel it was, during which phase, and what to
// change. ctx is the creation's context (see create).
func (c *Cluster) wrapCtx(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	during := "creation"
	var pe *phaseError
	if errors.As(err, &pe) {
		during = "the " + string(pe.phase) + " phase"
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCreateTimeout):
		return fmt.Errorf("the create timeout (%v) passed during %s: raise it with WithCreateTimeout: %w", c.cfg.createTimeout, during, err)
	case errors.Is(cause, errTestDeadline):
		return fmt.Errorf("the test binary's deadline (go test -timeout, less %v kept for cleanup) came during %s: raise -timeout: %w", cleanupMargin, during, err)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("the caller's context deadline passed during %s, before the create timeout (%v): give it a later deadline: %w", during, c.cfg.createTimeout, err)
	case errors.Is(cause, context.Canceled):
		return fmt.Errorf("creation cancelled by the caller during %s: %w", during, err)
	default:
		return fmt.Errorf("creation stopped during %s (%v): %w", during, cause, err)
	}
}

// checkVersion checks what could only be checked once the node image's
// Kubernetes version is known: the gates, when the generated list is of
// that version.
func (s *settings) checkVersion(image, version string) error {
	if image == DefaultImage || version != featureGatesVersion {
		return nil
	}
	return errors.Join(s.checkFeatureGates()...)
}

// checkMountSources checks that the host paths of mounts exist; only
// meaningful when the engine's host is this one.
func (s *settings) checkMountSources() error {
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(s.nodeMounts)) {
		for _, m := range s.nodeMounts[n] {
			if _, err := os.Stat(m.HostPath); err != nil {
				errs = append(errs, fmt.Errorf("node %d mount %s:%s: host path: %w", n, m.HostPath, m.ContainerPath, err))
			}
		}
	}
	return errors.Join(errs...)
}
