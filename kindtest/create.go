package kindtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/docker"
)

// apiServerPort is where kube-apiserver listens inside the control plane.
const apiServerPort = 6443

// NodeError reports the node and lifecycle step that failed, with what the
// node had to say about it.
type NodeError struct {
	Node        string
	Step        string
	Err         error
	Diagnostics string
}

// Error names node and step, then the cause and diagnostics.
func (e *NodeError) Error() string {
	s := fmt.Sprintf("node %s: %s: %v", e.Node, e.Step, e.Err)
	if e.Diagnostics != "" {
		s += "\n" + e.Diagnostics
	}
	return s
}

// Unwrap returns the cause.
func (e *NodeError) Unwrap() error { return e.Err }

// settled returns a context for requests that create engine objects: not
// cancelled with ctx, so that a request is never abandoned half-way, but
// bounded by the create timeout (a fixed minute was too short on a slow
// engine: under emulation one container start took longer).
func (c *Cluster) settled(ctx context.Context) (context.Context, context.CancelFunc) {
	return detached(ctx, c.cfg.createTimeout)
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
		return fmt.Errorf("cluster %s: the create timeout (%v) passed during %s: raise it with WithCreateTimeout: %w", c.name, c.cfg.createTimeout, during, err)
	case errors.Is(cause, errTestDeadline):
		return fmt.Errorf("cluster %s: the test binary's deadline (go test -timeout, less %v kept for cleanup) came during %s: raise -timeout: %w", c.name, cleanupMargin, during, err)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("cluster %s: the caller's context deadline passed during %s, before the create timeout (%v): give it a later deadline: %w", c.name, during, c.cfg.createTimeout, err)
	case errors.Is(cause, context.Canceled):
		return fmt.Errorf("cluster %s: creation cancelled by the caller during %s: %w", c.name, during, err)
	default:
		return fmt.Errorf("cluster %s: creation stopped during %s (%v): %w", c.name, during, cause, err)
	}
}

// createNode creates the node's volume and container and starts it: its
// entrypoint waits for the boot signal, for provisionNode to run first.
func (c *Cluster) createNode(ctx context.Context, n *Node) error {
	labels := nodeLabels(c.labels, n.role, n.index)
	varVolume := n.name + "-var"
	// Creation requests run to their end whatever happens to ctx (see
	// settled); ctx is checked between them.
	sctx, cancel := c.settled(ctx)
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
	n.ip = info.IPs[c.name]
	if n.index == 0 {
		if !c.ha() {
			c.apiServer = c.place.apiServerURL(c.name, info)
		}
		c.ports = info.Ports
	}
	return nil
}

// privilegedHint explains the usual reason a node container does not start.
const privilegedHint = `kindtest nodes are privileged containers: the engine must be able to run
` + "`docker run --privileged`" + ` (check with ` + "`docker run --rm --privileged <any image> true`" + `).
Rootless engines cannot, nor can hosts whose capability bounding set lacks a
capability Docker grants privileged containers; on such a host, give dockerd a
runtime that drops the missing capability, or use another host.`

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

// nodeError wraps err with what the node can tell about it: the last lines
// of its console (entrypoint and systemd) and the units that failed.
func (c *Cluster) nodeError(n *Node, step string, err error) error {
	diag := c.nodeDiagnostics(n)
	return &NodeError{Node: n.name, Step: step, Err: err, Diagnostics: diag + knownCauses(diag)}
}

// inotifyHint explains the usual cause of "Too many open files" in a node:
// every node's systemd, containerd and kubelet hold inotify instances,
// counted per user across all containers of the host, and the kernel's
// default of 128 runs out with a few clusters at once.
const inotifyHint = `
hint: "Too many open files" in a node usually means the host's inotify limits
are exhausted; raise them on the engine's host, as kind's known issues advise:
  sysctl fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288`

// knownCauses returns hints for failures whose diagnostics name a known
// cause, or "".
func knownCauses(diag string) string {
	if strings.Contains(diag, "Too many open files") || strings.Contains(diag, "too many open files") {
		return inotifyHint
	}
	return ""
}

func (c *Cluster) nodeDiagnostics(n *Node) string {
	if n.id == "" {
		return ""
	}
	// The context of the failed step may be over; diagnostics get their own.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if logs, err := c.docker.ContainerLogs(ctx, n.id, 30); err == nil && strings.TrimSpace(logs) != "" {
		fmt.Fprintf(&b, "last console lines of %s:\n%s", n.name, indent(logs))
	}
	if info, err := c.docker.InspectContainer(ctx, n.id); err == nil && info.Running {
		if res, err := n.Exec(ctx, "systemctl", "--failed", "--no-legend", "--plain"); err == nil && strings.TrimSpace(res.Stdout) != "" {
			fmt.Fprintf(&b, "failed units on %s:\n%s", n.name, indent(res.Stdout))
		}
	} else if err == nil {
		fmt.Fprintf(&b, "container %s is %s (exit code %d)\n", n.name, info.Status, info.ExitCode)
	}
	return strings.TrimRight(b.String(), "\n")
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(s, "\r", ""), "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
