package kindtest

import (
	"context"
	"errors"
	"fmt"
	"github.com/kindtest/kindtest/internal/bootstrap"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/flock"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/reaper"
)

// ErrDockerUnavailable is returned (wrapped) when no Docker engine answers.
// Test helpers skip on it, except when the CI environment variable is set.
var ErrDockerUnavailable = docker.ErrUnavailable

// Cluster is one Kubernetes cluster whose nodes are Docker containers.
type Cluster struct {
	name    string
	cfg     *config
	docker  *docker.Client
	labels  map[string]string
	created time.Time
	log     Logger

	nodes          []*Node
	kubeconfig     []byte // with the API server's host address
	kubeconfigPath string
	apiServer      string // https://127.0.0.1:PORT
	workDir        string // holds the kubeconfig file
	ownsWorkDir    bool   // Delete removes workDir
	timings        []PhaseTiming
	timingsMu      sync.Mutex // phases may run side by side
	// kubernetesVersion is what the node image carries, from its label.
	kubernetesVersion string
	token             string // kubeadm bootstrap token for joining workers
	// addons are the kube-proxy and CoreDNS objects, created during init.
	addons []bootstrap.Object
	// prebootFiles are files of the first control plane, by path, that it
	// printed before boot (the admin's and super-admin's kubeconfigs).
	prebootFiles map[string]string
	// lbIP is the load balancer's address on the cluster's network, with
	// several control planes (WithControlPlanes); "" with one.
	lbIP string

	// mu guards the fields below it: the deadline watcher and the signal
	// handler read them from other goroutines.
	mu sync.Mutex
	// ready is set once setup succeeded; a reusable cluster that is not
	// ready is removed, not kept.
	ready bool
	// marked is set once the cluster's marker volume says it is kept.
	marked    bool
	reuseLock *flock.Lock    // held while this run uses a reusable cluster
	watchdog  *reaper.Client // the reaper session this cluster is registered with

	deleteOnce  sync.Once
	deleteErr   error
	failureLogs failureLogs
	closeOnce   sync.Once
	// closed is set once the handle is closed (deleted, kept, released):
	// what needs a live cluster refuses to start then.
	closed atomic.Bool

	// ports maps the control plane's container ports ("6443/tcp") to the
	// host address they are published on.
	ports map[string]string

	// place is where this process stands relative to the engine; it
	// decides the API server's address (see placement).
	place placement
	// registryAddr is "localhost:PORT" of the cluster's registry, if any.
	registryAddr string
}

// New creates a cluster and returns once it is ready: every node booted
// and, unless WithoutKubernetes is given, Kubernetes up with every node and
// CoreDNS Ready. On failure everything created so far is removed (unless
// the keep policy keeps clusters whose creation failed: KeepOnFailure and
// KeepAlways) and the error says which node and step failed. The caller
// must Delete the cluster, or Close the handle to leave it in place.
func New(ctx context.Context, opts ...Option) (*Cluster, error) {
	c, err := prepare(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		// A context that ended is no sign of the engine's health: a
		// deadline is named as one (see wrapCtx), unless the engine does
		// not answer now either.
		hung := errors.Is(err, context.DeadlineExceeded) && !c.docker.Answers()
		endErr := c.end(lifetime.Failed)
		if hung || docker.IsUnreachable(err) || docker.IsUnreachable(endErr) {
			err = fmt.Errorf("%w\nkindtest: the engine at %s stopped answering while cluster %s was being made: what was made there stays until the engine answers again; then its reaper (once this process's connection to it drops), the next Start that reaches the engine, or `kindtest prune` removes it", err, c.docker.Host(), c.name)
		}
		return nil, errors.Join(err, endErr)
	}
	return c, nil
}

// end removes the cluster or keeps it, as the lifetime rule says for the
// outcome, within the delete timeout.
func (c *Cluster) end(o lifetime.Outcome) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.deleteTimeout)
	defer cancel()
	if c.outlives(o) {
		return c.keepFor(ctx, o)
	}
	return c.remove(ctx)
}

// outlives applies the lifetime rule to this cluster.
func (c *Cluster) outlives(o lifetime.Outcome) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	keeps := []string{c.labels[LabelKeep]}
	if c.marked {
		keeps = append(keeps, lifetime.Kept)
	}
	return lifetime.Outlives(keeps, o)
}

// keepFor leaves the cluster in place after outcome o: marked kept on the
// engine (so that the reaper and the sweep leave it too), no longer the
// reaper's or the signal handler's business, with a log line that says
// how to get in and how to remove it. The handle's own resources are
// released.
func (c *Cluster) keepFor(ctx context.Context, o lifetime.Outcome) error {
	err := c.markKept(ctx)
	unregister(c)
	c.unwatch()
	c.log.Printf("kindtest: keeping cluster %s (keep policy %s, test %s): %s", c.name, c.labels[LabelKeep], o, c.inspectHint())
	return errors.Join(err, c.Close())
}

// markKept records on the engine that the cluster outlives its owner: a
// marker volume labelled with the cluster and keep "kept". A cluster whose
// label already says so needs none.
func (c *Cluster) markKept(ctx context.Context) error {
	c.mu.Lock()
	done := c.marked || c.labels[LabelKeep] == lifetime.KeepAlways
	c.mu.Unlock()
	if done {
		return nil
	}
	labels := c.Labels()
	labels[LabelKeep] = lifetime.Kept
	if err := c.docker.CreateVolume(ctx, lifetime.MarkerVolume(c.name), labels); err != nil {
		return fmt.Errorf("cluster %s: mark it kept: %w", c.name, err)
	}
	c.mu.Lock()
	c.marked = true
	c.mu.Unlock()
	return nil
}

// connect validates the options, then connects to the engine.
func connect(ctx context.Context, opts []Option) (*config, *docker.Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("kindtest: invalid options: %w", err)
	}
	dc, err := docker.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("kindtest: %w", err)
	}
	return cfg, dc, nil
}

// prepare validates options, connects to the engine and checks the image,
// all before anything is created, and names the cluster.
func prepare(ctx context.Context, opts []Option) (*Cluster, error) {
	cfg, dc, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	img, err := nodeImage(ctx, dc, cfg.image, cfg.logger)
	if err != nil {
		dc.Close()
		return nil, err
	}
	place, err := detectPlacement(ctx, dc)
	if err != nil {
		dc.Close()
		return nil, fmt.Errorf("kindtest: %w", err)
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
		return nil, fmt.Errorf("kindtest: invalid options: %w", err)
	}
	if err := checkRegistryImage(ctx, dc, cfg); err != nil {
		dc.Close()
		return nil, err
	}
	if err := checkLoadBalancerImage(ctx, dc, cfg); err != nil {
		dc.Close()
		return nil, err
	}
	now := time.Now()
	name := newClusterName(cfg.prefix)
	keep := cfg.keep.String()
	if cfg.reuse {
		keep = lifetime.KeepReuse
	}
	labels := clusterLabels(name, now, keep)
	if cfg.reuse {
		labels[LabelReuse] = reuseHash(cfg, img.ID)
	}
	return &Cluster{
		name:              name,
		cfg:               cfg,
		docker:            dc,
		labels:            labels,
		created:           now,
		log:               cfg.logger,
		kubernetesVersion: version,
		place:             place,
	}, nil
}

// Name is the cluster's unique name; its network and node containers are
// named after it.
func (c *Cluster) Name() string { return c.name }

// Nodes returns every node, the control plane first.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// ControlPlane returns the control-plane node: the first of several
// (see ControlPlanes).
func (c *Cluster) ControlPlane() *Node { return c.nodes[0] }

// Workers returns the worker nodes, in order.
func (c *Cluster) Workers() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.role == RoleWorker {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node with the given name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// Labels returns the labels every resource of the cluster carries.
func (c *Cluster) Labels() map[string]string {
	out := make(map[string]string, len(c.labels))
	for k, v := range c.labels {
		out[k] = v
	}
	return out
}

// Delete removes every container, volume and network that carries the
// cluster's label, whatever state creation reached, and releases the
// handle. It is safe to call more than once and from several goroutines
// and processes at once; things already gone or being removed by someone
// else count as removed. It makes its own bounded context when ctx has no
// deadline. In reuse mode (WithReuse) a ready cluster is released for the
// next run instead: see WithReuse.
func (c *Cluster) Delete(ctx context.Context) error {
	c.mu.Lock()
	release := c.cfg.reuse && c.ready
	c.mu.Unlock()
	if release {
		c.deleteOnce.Do(func() { c.deleteErr = c.release(ctx) })
		return c.deleteErr
	}
	return c.remove(ctx)
}

// Close releases the handle without deleting the cluster: its engine
// connection and, in reuse mode, its claim on the cluster. Use it for a
// handle from Attach that another process owns, such as Ginkgo's parallel
// processes attached to the cluster of process 1. A cluster this process
// created stays registered with its reaper and is still removed when the
// process ends, unless its keep policy says otherwise. Close is idempotent;
// the handle must not be used after it.
func (c *Cluster) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.mu.Lock()
		lock := c.reuseLock
		c.reuseLock = nil
		c.mu.Unlock()
		if lock != nil {
			err = lock.Unlock()
		}
		err = errors.Join(err, c.docker.Close())
	})
	return err
}

// remove deletes the cluster's resources, once, and releases the handle.
func (c *Cluster) remove(ctx context.Context) error {
	c.deleteOnce.Do(func() {
		unregister(c)
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.cfg.deleteTimeout)
			defer cancel()
		}
		start := time.Now()
		c.deleteErr = removeCluster(ctx, c.docker, c.name)
		if c.ownsWorkDir {
			c.deleteErr = errors.Join(c.deleteErr, os.RemoveAll(c.workDir))
		}
		if c.deleteErr == nil {
			c.log.Printf("kindtest: %s: deleted in %v", c.name, time.Since(start).Round(time.Millisecond))
			c.unwatch()
		}
		c.deleteErr = errors.Join(c.deleteErr, c.Close())
	})
	return c.deleteErr
}

// removeCluster removes every resource labelled with the cluster's name,
// and its reuse lock file if it has one.
func removeCluster(ctx context.Context, dc *docker.Client, name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	err := dc.RemoveLabelled(ctx, map[string]string{LabelCluster: name})
	if err == nil {
		_ = os.Remove(reuseLockPath(name)) // most clusters have none
	}
	return err
}

// inspectHint tells a person how to look at a kept cluster and remove it.
func (c *Cluster) inspectHint() string {
	return fmt.Sprintf("inspect it with `docker exec -it %s bash`; delete it with `go run github.com/kindtest/kindtest/cmd/kindtest delete %s` or `docker rm -fv $(docker ps -aq --filter label=%s=%s) && docker volume rm $(docker volume ls -q --filter label=%s=%s); docker network rm %s`",
		nodeName(c.name, 0), c.name, LabelCluster, c.name, LabelCluster, c.name, c.name)
}
