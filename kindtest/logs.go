package kindtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// nodeLogCommands are gathered from every node by ExportLogs: file name and
// shell command.
var nodeLogCommands = [][2]string{
	{"journal.log", "journalctl --no-pager -o short-precise"},
	{"kubelet.log", "journalctl --no-pager -o short-precise -u kubelet"},
	{"containerd.log", "journalctl --no-pager -o short-precise -u containerd"},
	{"kubeadm.log", "cat /etc/kindtest/kubeadm-*.log /etc/kindtest/storage.log 2>/dev/null || true"},
	{"units.txt", "systemctl list-units --all --no-pager"},
	{"containers.txt", "ctr -n k8s.io containers ls; ctr -n k8s.io images ls -q"},
	{"network.txt", "ip addr; ip route; iptables-save; cat /etc/resolv.conf /etc/cni/net.d/*"},
	{"pod-logs.tar", "tar -C /var/log -cf - pods containers 2>/dev/null || true"},
}

// clusterLogCommands are kubectl views of the whole cluster.
var clusterLogCommands = [][2]string{
	{"nodes.txt", "get nodes -o wide"},
	{"nodes-describe.txt", "describe nodes"},
	{"pods.txt", "get pods -A -o wide"},
	{"pods-describe.txt", "describe pods -A"},
	{"events.txt", "get events -A --sort-by=.lastTimestamp"},
}

// ExportLogs writes the cluster's diagnostics under dir/<cluster name>/:
// for each node its container description and console, the journals of
// the kubelet and containerd, kubeadm's output and network state; for the
// cluster nodes, pods and events. It gathers what it can and returns the
// directory together with what failed.
func (c *Cluster) ExportLogs(ctx context.Context, dir string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	root := filepath.Join(dir, c.name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("export logs: %w", err)
	}
	var errs []error
	save := func(path string, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range c.nodes {
		if n.id == "" {
			continue
		}
		nd := filepath.Join(root, n.name)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if raw, err := c.docker.InspectContainerJSON(ctx, n.id); err == nil {
			save(filepath.Join(nd, "inspect.json"), raw)
		} else {
			errs = append(errs, err)
			continue
		}
		if logs, err := c.docker.ContainerLogs(ctx, n.id, 100000); err == nil {
			save(filepath.Join(nd, "console.log"), []byte(logs))
		}
		for _, lc := range nodeLogCommands {
			res, err := n.Exec(ctx, "sh", "-c", lc[1])
			if err != nil {
				var ee *ExitError
				if !errors.As(err, &ee) {
					errs = append(errs, err)
					break // the node does not answer
				}
			}
			save(filepath.Join(nd, lc[0]), []byte(res.Stdout+res.Stderr))
		}
	}
	if c.cfg.kubernetes && len(c.kubeconfig) > 0 {
		for _, lc := range clusterLogCommands {
			res, _ := c.Kubectl(ctx, strings.Fields(lc[1])...)
			save(filepath.Join(root, lc[0]), []byte(res.Stdout+res.Stderr))
		}
	}
	return root, errors.Join(errs...)
}

// failureLogs is the one export of a cluster's logs after its test failed,
// panicked or ran into the test binary's deadline: the end of the test
// and the deadline watcher may both get there, and the second waits for
// the first.
type failureLogs struct {
	once sync.Once
	dir  string
	err  error
}

// exportFailureLogs exports the cluster's logs into its artifacts
// directory (see WithArtifactsDir), once, and returns where they went
// with what failed. Only clusters made by Start have an artifacts
// directory.
func (c *Cluster) exportFailureLogs(ctx context.Context) (string, error) {
	if c.cfg.artifactsDir == "" {
		return "", errors.New("export logs: no artifacts directory")
	}
	c.life.failureLogs.once.Do(func() {
		c.life.failureLogs.dir, c.life.failureLogs.err = c.ExportLogs(ctx, c.cfg.artifactsDir)
	})
	return c.life.failureLogs.dir, c.life.failureLogs.err
}
