// What kindtest says when something fails: the typed node error, what a
// node, its kubelet, the cluster's pods or a waited-for object show, and
// the hints for known causes.
//
// Errors follow one rule: the package boundary (New, Start, Attach,
// Delete, WaitReady, MappedAddr) adds "kindtest:" and the cluster's name,
// once; the steps inside add only what they were doing ("create
// network: ...", "admin kubeconfig: ..."). A node's failure names the node
// (NodeError), a command's its node and command (ExitError).

package kindtest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

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

// privilegedHint explains the usual reason a node container does not start.
const privilegedHint = `kindtest nodes are privileged containers: the engine must be able to run
` + "`docker run --privileged`" + ` (check with ` + "`docker run --rm --privileged <any image> true`" + `).
A host whose capability bounding set lacks a capability Docker grants
privileged containers cannot; on such a host, give dockerd a runtime that drops
the missing capability, or use another host. A rootless engine runs them
privileged inside its user namespace: what it needs of the host (cgroup v2
delegation, a 5.11+ kernel, unprivileged ports) is checked before anything is
created.`

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

// kubeletDiagnostics is what a failed kubeadm step needs shown: the
// kubelet's last words and the containers the runtime ran.
func (c *Cluster) kubeletDiagnostics(n *Node) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var b strings.Builder
	if out, err := n.sh(ctx, "journalctl -u kubelet --no-pager -n 25 -o cat"); err == nil && out != "" {
		fmt.Fprintf(&b, "kubelet journal on %s (last lines):\n%s", n.name, indent(out))
	}
	if out, err := n.sh(ctx, "ctr -n k8s.io containers ls 2>&1 | tail -n 20"); err == nil && out != "" {
		fmt.Fprintf(&b, "containers on %s:\n%s", n.name, indent(out))
	}
	return strings.TrimRight(b.String(), "\n")
}

// podDiagnostics lists the pods that are not ready, with the reasons their
// containers give.
func (c *Cluster) podDiagnostics(api *apiClient) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pods podList
	if err := api.get(ctx, "/api/v1/pods", &pods); err != nil {
		return "pods: " + err.Error()
	}
	var lines []string
	for _, p := range pods.Items {
		ready := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready = true
			}
		}
		if ready || p.Status.Phase == "Succeeded" {
			continue
		}
		line := fmt.Sprintf("%s/%s on %q: %s", p.Metadata.Namespace, p.Metadata.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			for state, s := range cs.State {
				if s.Reason != "" || s.Message != "" {
					line += fmt.Sprintf("; %s %s: %s %s", cs.Name, state, s.Reason, s.Message)
				}
			}
		}
		lines = append(lines, "    "+line)
	}
	if len(lines) == 0 {
		return ""
	}
	sort.Strings(lines)
	return "pods not ready:\n" + strings.Join(lines, "\n")
}

// startHint explains why a node container may not start: a fixed host
// port of WithPortMapping that is taken, or privileges.
func (c *Cluster) startHint(n *Node) string {
	var fixed []string
	for _, m := range c.cfg.portMappings {
		if m.hostPort != 0 {
			fixed = append(fixed, strconv.Itoa(m.hostPort))
		}
	}
	if n.index != 0 || len(fixed) == 0 {
		return privilegedHint
	}
	return fmt.Sprintf("WithPortMapping asks for host port(s) %s on %s: one may be in use (use host port 0 to let the engine choose), or:\n%s",
		strings.Join(fixed, ", "), c.place.publishIP, privilegedHint)
}

// inspectHint tells a person how to look at a kept cluster and remove it.
func (c *Cluster) inspectHint() string {
	return fmt.Sprintf("inspect it with `docker exec -it %s bash`; delete it with `go run github.com/kindtest/kindtest/cmd/kindtest delete %s` or `docker rm -fv $(docker ps -aq --filter label=%s=%s) && docker volume rm $(docker volume ls -q --filter label=%s=%s); docker network rm %s`",
		nodeName(c.name, 0), c.name, LabelCluster, c.name, LabelCluster, c.name, c.name)
}
