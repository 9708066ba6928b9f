package kindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
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

	// ready is set once setup succeeded; a reusable cluster that is not
	// ready is removed, not kept.
	ready     bool
	reuseLock *os.File // held while this run uses a reusable cluster

	deleteOnce sync.Once
	deleteErr  error
}

// PhaseTiming is how long one phase of cluster creation took.
type PhaseTiming struct {
	Phase    string
	Duration time.Duration
}

// New creates a cluster and returns once it is ready: every node booted
// and, unless WithoutKubernetes is given, Kubernetes up with every node and
// CoreDNS Ready. On failure everything created so far is removed (unless a
// keep policy says otherwise) and the error says which node and step
// failed. The caller must Delete the cluster.
func New(ctx context.Context, opts ...Option) (*Cluster, error) {
	c, err := prepare(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		if c.cfg.keep == KeepNever || c.cfg.reuse {
			err = errors.Join(err, c.Delete(context.Background()))
		} else {
			c.log.Printf("kindtest: keeping cluster %s after failure: %s", c.name, c.inspectHint())
		}
		return nil, err
	}
	return c, nil
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
	sweepOrphans(ctx, dc, cfg.logger)
	ensureReaper(cfg.logger)
	now := time.Now()
	name := newClusterName(cfg.prefix)
	labels := clusterLabels(name, now, cfg.keep)
	if cfg.reuse {
		labels[LabelKeep] = keepReuse
		labels[LabelReuse] = reuseHash(cfg, img.ID)
	}
	version := img.Labels[images.LabelKubernetesVersion]
	if version == "" {
		version = KubernetesVersion
	}
	return &Cluster{
		name:              name,
		cfg:               cfg,
		docker:            dc,
		labels:            labels,
		created:           now,
		log:               cfg.logger,
		kubernetesVersion: version,
	}, nil
}

// Name is the cluster's unique name; its network and node containers are
// named after it.
func (c *Cluster) Name() string { return c.name }

// Nodes returns every node, the control plane first.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// ControlPlane returns the control-plane node.
func (c *Cluster) ControlPlane() *Node { return c.nodes[0] }

// Workers returns the worker nodes, in order.
func (c *Cluster) Workers() []*Node { return append([]*Node(nil), c.nodes[1:]...) }

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

// Timings returns how long each phase of creation took.
func (c *Cluster) Timings() []PhaseTiming {
	c.timingsMu.Lock()
	defer c.timingsMu.Unlock()
	return append([]PhaseTiming(nil), c.timings...)
}

// phase runs one step of creation, logging and recording its duration.
func (c *Cluster) phase(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	d := time.Since(start)
	if err != nil {
		c.log.Printf("kindtest: %s: %s failed after %v", c.name, name, d.Round(time.Millisecond))
		return err
	}
	c.timingsMu.Lock()
	c.timings = append(c.timings, PhaseTiming{Phase: name, Duration: d})
	c.timingsMu.Unlock()
	c.log.Printf("kindtest: %s: %s done in %v", c.name, name, d.Round(time.Millisecond))
	return nil
}

// Delete removes every container, volume and network that carries the
// cluster's label, whatever state creation reached. It is safe to call more
// than once and from several goroutines; things already gone count as
// removed. It makes its own bounded context when ctx has no deadline. In
// reuse mode (WithReuse) a ready cluster is released for the next run
// instead: see WithReuse.
func (c *Cluster) Delete(ctx context.Context) error {
	if c.cfg.reuse && c.ready {
		c.deleteOnce.Do(func() { c.deleteErr = c.release(ctx) })
		return c.deleteErr
	}
	return c.remove(ctx)
}

// remove deletes the cluster's resources, once.
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
		}
		c.docker.Close()
	})
	return c.deleteErr
}

// removeCluster removes every resource labelled with the cluster's name,
// and its reuse lock file if it has one.
func removeCluster(ctx context.Context, dc *docker.Client, name string) error {
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
