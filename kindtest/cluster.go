package kindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/flock"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// ErrDockerUnavailable is returned (wrapped) when no Docker engine answers.
// Test helpers skip on it, except when the CI environment variable is set.
var ErrDockerUnavailable = docker.ErrUnavailable

// Cluster is one Kubernetes cluster whose nodes are Docker containers.
//
// The handle holds what outlives creation, in three plain structs: which
// cluster it is (identity), how this process reaches it (access) and
// where it stands in its life (life). What one creation step hands the
// next travels in a creation value instead (see create.go). Attaching to
// a reused cluster swaps identity and access whole.
type Cluster struct {
	cfg    *config
	docker *docker.Client
	log    Logger
	// place is where this process stands relative to the engine; it
	// decides the API server's address (see placement).
	place placement
	identity
	access
	life life
	// timings are how long each phase of this handle's creation took,
	// set once creation is done.
	timings []PhaseTiming
}

// identity is which cluster a handle is on.
type identity struct {
	name    string
	labels  map[string]string // on every resource of the cluster
	created time.Time
	nodes   []*Node
}

// access is how this process reaches a cluster.
type access struct {
	apiServer      string // https://127.0.0.1:PORT
	kubeconfig     []byte // with the API server's host address
	kubeconfigPath string
	workDir        string // holds the kubeconfig file
	ownsWorkDir    bool   // Delete removes workDir
	// ports maps the control plane's container ports ("6443/tcp") to the
	// host address they are published on.
	ports map[string]string
	// lbIP is the load balancer's address on the cluster's network, with
	// several control planes (WithControlPlanes); "" with one.
	lbIP string
	// registryAddr is "localhost:PORT" of the cluster's registry, if any.
	registryAddr string
}

// life is where a handle stands in its cluster's life. The deadline
// watcher and the signal handler read it from other goroutines: mu
// guards the fields up to watchdog.
type life struct {
	mu sync.Mutex
	// ready is set once setup succeeded; a reusable cluster that is not
	// ready is removed, not kept.
	ready bool
	// marked is set once the cluster's marker volume says it is kept.
	marked    bool
	reuseLock *flock.Lock // held while this run uses a reusable cluster
	watchdog  *watchdog   // the reaper this cluster is registered with

	endOnce sync.Once // the cluster is released, kept or removed once
	endErr  error
	// closeOnce closes the handle once (see Close).
	closeOnce sync.Once
	// closed is set once the handle is closed (deleted, kept, released):
	// what needs a live cluster refuses to start then.
	closed atomic.Bool
}

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
		endErr := c.end(lifetime.Failed)
		if docker.IsUnreachable(err) || docker.IsUnreachable(endErr) {
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
	c.life.mu.Lock()
	defer c.life.mu.Unlock()
	keeps := []string{c.labels[LabelKeep]}
	if c.life.marked {
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
	c.life.mu.Lock()
	done := c.life.marked || c.labels[LabelKeep] == lifetime.KeepAlways
	c.life.mu.Unlock()
	if done {
		return nil
	}
	labels := c.Labels()
	labels[LabelKeep] = lifetime.Kept
	if err := c.docker.CreateVolume(ctx, markerVolumeName(c.name), labels); err != nil {
		return fmt.Errorf("cluster %s: mark it kept: %w", c.name, err)
	}
	c.life.mu.Lock()
	c.life.marked = true
	c.life.mu.Unlock()
	return nil
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
	c.life.mu.Lock()
	release := c.cfg.reuse && c.life.ready
	c.life.mu.Unlock()
	if release {
		c.life.endOnce.Do(func() { c.life.endErr = c.release(ctx) })
		return c.life.endErr
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
	c.life.closeOnce.Do(func() {
		c.life.closed.Store(true)
		c.life.mu.Lock()
		lock := c.life.reuseLock
		c.life.reuseLock = nil
		c.life.mu.Unlock()
		if lock != nil {
			err = lock.Unlock()
		}
		err = errors.Join(err, c.docker.Close())
	})
	return err
}

// remove deletes the cluster's resources, once, and releases the handle.
func (c *Cluster) remove(ctx context.Context) error {
	c.life.endOnce.Do(func() {
		unregister(c)
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.cfg.deleteTimeout)
			defer cancel()
		}
		start := time.Now()
		c.life.endErr = removeCluster(ctx, c.docker, c.name)
		if c.ownsWorkDir {
			c.life.endErr = errors.Join(c.life.endErr, os.RemoveAll(c.workDir))
		}
		if c.life.endErr == nil {
			c.log.Printf("kindtest: %s: deleted in %v", c.name, time.Since(start).Round(time.Millisecond))
			c.unwatch()
		}
		c.life.endErr = errors.Join(c.life.endErr, c.Close())
	})
	return c.life.endErr
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

// Timings returns how long each phase of creation took, in the order the
// phases ended; none for a reused cluster.
func (c *Cluster) Timings() []PhaseTiming {
	return append([]PhaseTiming(nil), c.timings...)
}
