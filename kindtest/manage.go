// Clusters found on the engine by their labels: List, DeleteCluster,
// Prune and the background sweep, and Attach.

package kindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// ClusterInfo describes a cluster found on the engine by its labels.
type ClusterInfo struct {
	Name    string
	Session string
	Owner   Owner
	// OwnerAlive is false when the owning process is known to be gone.
	OwnerAlive bool
	Created    time.Time
	Nodes      int
	// Keep is the keep policy the cluster was made with: never,
	// on-failure, always or reuse.
	Keep string
	// Kept is true when the cluster outlives its owner, whatever the owner
	// does: keep "always", or marked kept after a failure or, for a
	// reusable cluster, once complete.
	Kept bool
	// Pool is the id of the pool that made the cluster (see NewPool), ""
	// for none; a cluster claimed from it is its claimer's: Session,
	// Owner and Keep are the claimer's.
	Pool string
}

// List returns the clusters on the engine, oldest first.
func List(ctx context.Context) ([]ClusterInfo, error) {
	dc, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	return list(ctx, dc)
}

func list(ctx context.Context, dc *docker.Client) ([]ClusterInfo, error) {
	byName := map[string]*ClusterInfo{}
	claims := map[string]map[string]string{} // cluster: its claim's labels
	record := func(l map[string]string, isNode bool) {
		name := l[LabelCluster]
		if l[LabelRole] == lifetime.RoleClaim {
			claims[name] = l
		}
		ci := byName[name]
		if ci == nil {
			created, _ := time.Parse(time.RFC3339, l[LabelCreated])
			owner := ownerFromLabels(l)
			ci = &ClusterInfo{Name: name, Session: l[LabelSession], Owner: owner, OwnerAlive: ownerAlive(owner), Created: created}
			byName[name] = ci
		}
		if k := l[LabelKeep]; k != lifetime.Kept {
			ci.Keep = k
		}
		// A cluster whose owner vanished outlives it exactly when the
		// rule says so for any of its resources.
		if lifetime.Outlives([]string{l[LabelKeep]}, lifetime.Vanished) {
			ci.Kept = true
		}
		if isNode {
			ci.Nodes++
		}
		if p := l[LabelPool]; p != "" {
			ci.Pool = p
		}
	}
	sel := map[string]string{LabelCluster: ""}
	cs, err := dc.ListContainers(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		role := c.Labels[LabelRole]
		record(c.Labels, !isSidecar(role) && role != lifetime.RoleClaim)
	}
	// A cluster whose creation stopped early may have only a network or
	// volumes left.
	vs, err := dc.ListVolumes(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		record(v.Labels, false)
	}
	ns, err := dc.ListNetworks(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		record(n.Labels, false)
	}
	// A claimed cluster is its claimer's (see lifetime.RoleClaim).
	for name, l := range claims {
		ci := byName[name]
		ci.Session, ci.Owner = l[LabelSession], ownerFromLabels(l)
		ci.OwnerAlive = ownerAlive(ci.Owner)
		if k := l[LabelKeep]; k != lifetime.Kept {
			ci.Keep = k
		}
	}
	out := make([]ClusterInfo, 0, len(byName))
	for _, ci := range byName {
		out = append(out, *ci)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// DeleteCluster removes every resource labelled with the cluster's name. A
// cluster that does not exist is an error, so that a typo is noticed.
func DeleteCluster(ctx context.Context, name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return fmt.Errorf("delete cluster: %w", err)
	}
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	all, err := list(ctx, dc)
	if err != nil {
		return err
	}
	for _, ci := range all {
		if ci.Name == name {
			return removeCluster(ctx, dc, name)
		}
	}
	return fmt.Errorf("delete cluster %s: no such cluster (see `kindtest list`)", name)
}

// PruneScope says which clusters Prune removes.
type PruneScope int

const (
	// PruneOrphans removes clusters whose owning process is gone and that
	// do not outlive it (see KeepPolicy), reaper containers that never
	// started or have stopped, whose owner is gone, and the kubeconfig
	// directories in os.TempDir() of handles whose process is gone.
	PruneOrphans PruneScope = iota
	// PruneAll removes every kindtest cluster on the engine.
	PruneAll
)

// Prune removes clusters and returns the names of those it removed.
func Prune(ctx context.Context, scope PruneScope) ([]string, error) {
	dc, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	return prune(ctx, dc, scope)
}

func prune(ctx context.Context, dc *docker.Client, scope PruneScope) ([]string, error) {
	all, err := list(ctx, dc)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	for _, ci := range all {
		// Kept clusters outlive their owner on purpose.
		if scope == PruneOrphans && (ci.OwnerAlive || ci.Kept) {
			continue
		}
		if err := removeCluster(ctx, dc, ci.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, ci.Name)
	}
	if err := pruneReapers(ctx, dc, scope); err != nil {
		errs = append(errs, err)
	}
	// The kubeconfigs of handles whose process was killed before it
	// could remove them, of clusters on this engine or any other.
	if _, err := sweepWorkDirs(os.TempDir()); err != nil {
		errs = append(errs, err)
	}
	return names, errors.Join(errs...)
}

// pruneReapers removes reaper containers that are not running (a process
// killed between creating its reaper and starting it leaves one) and whose
// owner is gone; with PruneAll, every reaper container not running. A
// running reaper is left alone: it exits by itself once its work is done.
func pruneReapers(ctx context.Context, dc *docker.Client, scope PruneScope) error {
	rs, err := dc.ListContainers(ctx, map[string]string{LabelReaper: "true"})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rs {
		if r.Running || (scope == PruneOrphans && ownerAlive(ownerFromLabels(r.Labels))) {
			continue
		}
		errs = append(errs, dc.RemoveContainer(ctx, r.ID))
	}
	return errors.Join(errs...)
}

// sweepOrphans starts, once per process and in the background, the removal
// of clusters left by test processes that died before they could clean up
// and that no reaper removed (a SIGKILL without a reaper, a crash). It
// never holds up creation: an orphan the engine cannot remove (a container
// it cannot kill) would otherwise cost every Start its removal deadline.
// It is silent, on its own connection and bounded; `kindtest prune` does
// the same and reports.
func sweepOrphans() {
	proc.sweepOnce.Do(func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dc, err := docker.New(ctx)
			if err != nil {
				return
			}
			defer dc.Close()
			_, _ = prune(ctx, dc, PruneOrphans)
		}()
	})
}

// Attach returns a handle on an existing cluster, made by this process or
// another one: for example the cluster that Ginkgo's first parallel process
// created in SynchronizedBeforeSuite. Deleting an attached cluster removes
// it for everyone; Close releases the handle and leaves the cluster.
func Attach(ctx context.Context, name string, opts ...Option) (*Cluster, error) {
	if err := lifetime.CheckClusterName(name); err != nil {
		return nil, fmt.Errorf("kindtest: attach: %w", err)
	}
	cfg, dc, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, docker: dc, log: cfg.logger}
	if err := c.attach(ctx, name); err != nil {
		dc.Close()
		return nil, fmt.Errorf("kindtest: attach %s: %w", name, err)
	}
	return c, nil
}

// attachNodes fills c's nodes, sidecars and addresses from the cluster's
// containers; what its options were is attach's to find out.
func (c *Cluster) attachNodes(ctx context.Context, name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	all, err := c.docker.ListContainers(ctx, map[string]string{LabelCluster: name})
	if err != nil {
		return err
	}
	// A claim record (a cluster claimed from a pool) is no node.
	cs := all[:0]
	for _, ct := range all {
		if ct.Labels[LabelRole] != RoleClaim {
			cs = append(cs, ct)
		}
	}
	cs, found, err := c.adoptSidecars(ctx, cs)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return errors.New("no such cluster (see `kindtest list`)")
	}
	c.name = name
	if c.place, err = detectPlacement(ctx, c.docker); err != nil {
		return err
	}
	if err := c.place.joinNetwork(ctx, c.docker, name); err != nil {
		return err
	}
	c.nodes = make([]*Node, len(cs))
	for _, ct := range cs {
		i, err := strconv.Atoi(ct.Labels[LabelNodeIndex])
		if err != nil || i < 0 || i >= len(cs) || c.nodes[i] != nil {
			return fmt.Errorf("node %s has a bad %s label %q", ct.Name, LabelNodeIndex, ct.Labels[LabelNodeIndex])
		}
		info, err := c.docker.InspectContainer(ctx, ct.ID)
		if err != nil {
			return err
		}
		if !info.Running {
			return fmt.Errorf("node %s is %s", ct.Name, info.Status)
		}
		c.nodes[i] = &Node{name: info.Name, id: info.ID, role: ct.Labels[LabelRole], index: i, ip: info.IPs[name], ip6: info.IPv6s[name], docker: c.docker, cluster: c}
		if i == 0 {
			c.labels = map[string]string{}
			for _, k := range []string{LabelCluster, LabelSession, LabelOwnerHost, LabelOwnerPID, LabelOwnerStart, LabelCreated, LabelKeep, LabelReuse} {
				if v, ok := ct.Labels[k]; ok {
					c.labels[k] = v
				}
			}
			c.cfg.image = info.Image
			c.apiServer = c.place.apiServerURL(name, info)
			c.ports = info.Ports
		}
	}
	c.cfg.workers, c.cfg.controlPlanes = 0, 0
	for _, n := range c.nodes {
		if n.role == RoleControlPlane {
			c.cfg.controlPlanes++
		} else {
			c.cfg.workers++
		}
	}
	// After the nodes: the load balancer's address replaces the control
	// plane's.
	for _, a := range found {
		if err := a.s.record(c, a.info); err != nil {
			return err
		}
	}
	return nil
}

// attach fills c from the cluster's containers and its control plane.
func (c *Cluster) attach(ctx context.Context, name string) error {
	if err := c.attachNodes(ctx, name); err != nil {
		return err
	}
	// A cluster made WithoutKubernetes has no admin kubeconfig.
	if _, err := c.ControlPlane().run(ctx, "test", "-f", adminKubeconfig); err != nil {
		c.cfg.kubernetes = false
		return nil
	}
	c.cfg.kubernetes = true
	c.cfg.noDefaultCNI = c.attachedWithoutDefaultCNI(ctx)
	return c.fetchKubeconfig(ctx, nil)
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
