// How a cluster ends, decided in one place (ending) and carried out in
// one (end): released for the next run, kept, or removed.

package kindtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// ending is one of the three ways a cluster ends.
type ending int

const (
	// endRelease: a ready reusable cluster is handed to the next run,
	// its namespaces cleaned (see release).
	endRelease ending = iota
	// endKeep: the cluster outlives its owner (see keepFor).
	endKeep
	// endRemove: the cluster is removed (see remove).
	endRemove
)

// ending decides how the cluster ends after outcome o; it is the only
// place that does. A ready reusable cluster is released, however the run
// ended (its test passed or failed, Delete, a signal, the test binary's
// deadline). Any other is kept when the lifetime rule says it outlives an
// owner that ended so (lifetime.Outlives), and removed otherwise.
func (c *Cluster) ending(o lifetime.Outcome) ending {
	c.life.mu.Lock()
	defer c.life.mu.Unlock()
	if c.cfg.reuse && c.life.ready {
		return endRelease
	}
	keeps := []string{c.labels[LabelKeep]}
	if c.life.marked {
		keeps = append(keeps, lifetime.Kept)
	}
	if lifetime.Outlives(keeps, o) {
		return endKeep
	}
	return endRemove
}

// end ends the cluster after outcome o, once, as ending decides: every
// path goes through it (a failed New, Start's cleanup, Delete, a signal,
// the test binary's deadline). Later calls return the first one's error.
// It works within ctx; when ctx has no deadline, within the delete
// timeout instead, and then not cut short by ctx's cancellation.
func (c *Cluster) end(ctx context.Context, o lifetime.Outcome) error {
	c.life.endOnce.Do(func() {
		c.stopServiceLBs()
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.cfg.deleteTimeout)
			defer cancel()
		}
		switch c.ending(o) {
		case endRelease:
			c.life.endErr = c.release(ctx)
		case endKeep:
			c.life.endErr = c.keepFor(ctx, o)
		default:
			c.life.endErr = c.remove(ctx)
		}
	})
	return c.life.endErr
}

// keepFor leaves the cluster in place after outcome o: marked kept on the
// engine (so that the reaper and the sweep leave it too), no longer the
// reaper's or the signal handler's business, with a log line that says
// how to get in and how to remove it. The handle's own resources are
// released.
func (c *Cluster) keepFor(ctx context.Context, o lifetime.Outcome) error {
	err := c.markKept(ctx)
	proc.unregister(c)
	c.unwatch()
	c.log.Printf("kindtest: keeping cluster %s (keep policy %s, test %s): %s%s", c.name, c.labels[LabelKeep], o, c.inspectHint(), c.keepWorkDir())
	return errors.Join(err, c.Close())
}

// keepWorkDir leaves a kubeconfig to the kept cluster, in a directory
// without an owner file, so that neither Close nor the sweep removes it;
// it goes when the cluster is deleted. A directory this handle made is
// kept as it is; Start's is the test's, removed after it, so the
// kubeconfig is written to one of its own. It returns the log's words for
// where the kubeconfig is.
func (c *Cluster) keepWorkDir() string {
	if c.kubeconfigPath == "" {
		return ""
	}
	if c.ownsWorkDir {
		c.ownsWorkDir = false
		if err := os.Remove(filepath.Join(c.workDir, workDirOwnerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("; its kubeconfig %s may be removed by the next sweep: %v", c.kubeconfigPath, err)
		}
		return "; its kubeconfig: " + c.kubeconfigPath
	}
	dir, err := os.MkdirTemp("", workDirPrefix+c.name+"-")
	if err == nil {
		path := filepath.Join(dir, "kubeconfig")
		if err = os.WriteFile(path, c.kubeconfig, 0o600); err == nil {
			return "; its kubeconfig: " + path
		}
		_ = os.RemoveAll(dir)
	}
	return fmt.Sprintf("; no kubeconfig kept for it (%v): read /etc/kubernetes/admin.conf in %s", err, nodeName(c.name, 0))
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
		return fmt.Errorf("mark it kept: %w", err)
	}
	c.life.mu.Lock()
	c.life.marked = true
	c.life.mu.Unlock()
	return nil
}

// Delete removes every container, volume and network that carries the
// cluster's label, whatever state creation reached, and releases the
// handle. It is safe to call more than once and from several goroutines
// and processes at once; things already gone or being removed by someone
// else count as removed. It makes its own bounded context when ctx has no
// deadline. In reuse mode (WithReuse) a ready cluster is released for the
// next run instead: see WithReuse.
func (c *Cluster) Delete(ctx context.Context) error {
	if err := c.end(ctx, lifetime.Deleted); err != nil {
		return fmt.Errorf("kindtest: delete cluster %s: %w", c.name, err)
	}
	return nil
}

// remove deletes the cluster's resources and releases the handle.
func (c *Cluster) remove(ctx context.Context) error {
	proc.unregister(c)
	start := time.Now()
	err := removeCluster(ctx, c.docker, c.name)
	// A directory Start's test owns stays for the test to remove, but
	// not the credentials of a cluster that is gone.
	if c.kubeconfigPath != "" && !c.ownsWorkDir {
		if rerr := os.Remove(c.kubeconfigPath); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if err == nil {
		c.log.Printf("kindtest: %s: deleted in %v", c.name, time.Since(start).Round(time.Millisecond))
		c.unwatch()
	}
	return errors.Join(err, c.Close())
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
		err = removeWorkDirs(os.TempDir(), name)
	}
	return err
}

// release ends a run's use of a reusable cluster: its objects are cleaned
// up and the handle is closed, which drops the
// lock; the cluster stays.
func (c *Cluster) release(ctx context.Context) error {
	proc.unregister(c)
	c.unwatch()
	err := c.cleanNamespaces(ctx)
	c.log.Printf("kindtest: %s: kept for reuse (KINDTEST_REUSE); remove it with `go run github.com/kindtest/kindtest/cmd/kindtest delete %s`", c.name, c.name)
	return errors.Join(err, c.Close())
}
