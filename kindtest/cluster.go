// The handle on a cluster: identity, access and life, and its accessors.

package kindtest

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/flock"
	"github.com/kindtest/kindtest/internal/reaper"
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
	name   string
	labels map[string]string // on every resource of the cluster
	nodes  []*Node
	// shape is the hash of the options that make the cluster what it is
	// (see reuseHash), set by New: reuse and pools match by it.
	shape string
}

// access is how this process reaches a cluster.
type access struct {
	apiServer      string // https://127.0.0.1:PORT
	kubeconfig     []byte // with the API server's host address
	kubeconfigPath string
	workDir        string // holds the kubeconfig file
	ownsWorkDir    bool   // made by this handle (newWorkDir): Close removes it
	// ports maps the control plane's container ports ("6443/tcp") to the
	// host address they are published on.
	ports map[string]string
	// lbIP and lbIP6 are the load balancer's addresses on the cluster's
	// network, with several control planes (WithControlPlanes); "" with
	// one, and lbIP6 "" in an IPv4 cluster.
	lbIP, lbIP6 string
	// registryAddr is "localhost:PORT" of the cluster's registry, if any.
	registryAddr string
}

// life is where a handle stands in its cluster's life. The deadline
// watcher and the signal handler read it from other goroutines: mu
// guards the fields up to reaper.
type life struct {
	mu sync.Mutex
	// ready is set once setup succeeded; a reusable cluster that is not
	// ready is removed, not kept.
	ready bool
	// marked is set once the cluster's marker volume says it is kept.
	marked    bool
	reuseLock *flock.Lock     // held while this run uses a reusable cluster
	reaper    *reaper.Session // the reaper session this cluster is registered with
	// stopLBs stops the LoadBalancer Services' controller (unless
	// WithoutLoadBalancer), which runs in the process that made the
	// cluster; nil when none runs.
	stopLBs func()

	endOnce sync.Once // the cluster is released, kept or removed once
	endErr  error
	// failureLogs is the one export of its logs after a failure.
	failureLogs failureLogs
	// closeOnce closes the handle once (see Close).
	closeOnce sync.Once
	// closed is set once the handle is closed (deleted, kept, released):
	// what needs a live cluster refuses to start then.
	closed atomic.Bool
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
		// The LoadBalancer Services' controller needs the engine
		// connection closed below.
		c.stopServiceLBs()
		c.life.mu.Lock()
		lock := c.life.reuseLock
		c.life.reuseLock = nil
		c.life.mu.Unlock()
		if lock != nil {
			err = lock.Unlock()
		}
		err = errors.Join(err, c.docker.Close())
		// The handle's own kubeconfig goes with it; a kept cluster's
		// stays (keepWorkDir).
		if c.ownsWorkDir {
			err = errors.Join(err, os.RemoveAll(c.workDir))
		}
	})
	return err
}

// stopServiceLBs stops the controller, if one runs, and waits for it.
func (c *Cluster) stopServiceLBs() {
	c.life.mu.Lock()
	stop := c.life.stopLBs
	c.life.stopLBs = nil
	c.life.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Timings returns how long each phase of creation took, in the order the
// phases ended; none for a reused cluster.
func (c *Cluster) Timings() []PhaseTiming {
	return append([]PhaseTiming(nil), c.timings...)
}
