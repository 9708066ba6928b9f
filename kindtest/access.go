// How a test reaches a cluster's API: the kubeconfig, the API server's
// address, kubectl in the control plane.

package kindtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// usable fails when the handle can no longer reach the cluster, or the
// cluster has no Kubernetes.
func (c *Cluster) usable(what string) error {
	if c.life.closed.Load() {
		return fmt.Errorf("%s: cluster %s was deleted or its handle closed: use it before the cluster's cleanup runs (register your cleanup after Start, or use a subtest)", what, c.name)
	}
	if !c.cfg.kubernetes {
		return fmt.Errorf("%s: cluster %s was made WithoutKubernetes", what, c.name)
	}
	return nil
}

// hostKubeconfig reads the kubeconfig at path (the user's, for errors)
// from node cp, or takes it from what the first control plane printed
// before boot, and points it at the API server's published address.
func (c *Cluster) hostKubeconfig(ctx context.Context, cp *Node, path, user string, preboot map[string]string) ([]byte, error) {
	raw, ok := preboot[path]
	if !ok || cp != c.ControlPlane() {
		var err error
		if raw, err = cp.run(ctx, "cat", path); err != nil {
			return nil, c.nodeError(cp, "read "+user+" kubeconfig", err)
		}
	}
	kc, err := rewriteServer([]byte(raw), c.apiServer)
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig: %w", user, err)
	}
	return kc, nil
}

// fetchKubeconfig reads the admin kubeconfig from the control plane,
// points it at the API server's published host port and writes it to the
// cluster's work directory.
func (c *Cluster) fetchKubeconfig(ctx context.Context, preboot map[string]string) error {
	kc, err := c.hostKubeconfig(ctx, c.ControlPlane(), adminKubeconfig, "admin", preboot)
	if err != nil {
		return err
	}
	c.kubeconfig = kc
	if c.workDir == "" {
		dir, err := newWorkDir(c.name)
		if err != nil {
			return fmt.Errorf("work directory: %w", err)
		}
		c.workDir, c.ownsWorkDir = dir, true
	}
	c.kubeconfigPath = filepath.Join(c.workDir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfigPath, kc, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Kubeconfig returns an admin kubeconfig for the cluster whose server is
// the API server's address on the host (127.0.0.1 and a port the engine
// chose).
func (c *Cluster) Kubeconfig() []byte { return append([]byte(nil), c.kubeconfig...) }

// KubeconfigPath returns the path of a file holding Kubeconfig: in the
// test's temporary directory for Start; for New and Attach, in a directory
// of the handle's own in os.TempDir(), removed by Delete or Close. A kept
// cluster's stays until the cluster is deleted; one left by a killed
// process goes with the next sweep (Start's, `kindtest prune`).
// ~/.kube/config is never touched.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// APIServer returns the API server's URL on the host.
func (c *Cluster) APIServer() string { return c.apiServer }

// Kubectl runs kubectl inside the control-plane node (with several, the
// first one running) with the admin kubeconfig, so the host needs no
// kubectl. A non-zero exit is an *ExitError.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (ExecResult, error) {
	return c.KubectlInput(ctx, nil, args...)
}

// KubectlInput is Kubectl with stdin, as in `kubectl apply -f -`.
func (c *Cluster) KubectlInput(ctx context.Context, stdin io.Reader, args ...string) (ExecResult, error) {
	if !c.cfg.kubernetes {
		return ExecResult{}, errors.New("kubectl: cluster " + c.name + " was made WithoutKubernetes")
	}
	cmd := append([]string{"kubectl", "--kubeconfig", adminKubeconfig}, args...)
	cp, err := c.runningControlPlane(ctx)
	if err != nil {
		return ExecResult{}, err
	}
	return cp.ExecInput(ctx, stdin, cmd...)
}

// Apply applies manifests (YAML or JSON, several documents allowed) with
// kubectl apply.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	_, err := c.KubectlInput(ctx, strings.NewReader(string(manifests)), "apply", "-f", "-")
	return err
}

// PodExec runs cmd in a container of a pod (the first container when
// container is "") through kubectl exec.
func (c *Cluster) PodExec(ctx context.Context, namespace, pod, container string, cmd ...string) (ExecResult, error) {
	args := []string{"exec", "-n", namespace, pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	args = append(args, "--")
	return c.Kubectl(ctx, append(args, cmd...)...)
}

// runningControlPlane returns the first control plane whose container
// runs, for commands run inside one (Kubectl): with several control
// planes one may be stopped.
func (c *Cluster) runningControlPlane(ctx context.Context) (*Node, error) {
	cps := c.ControlPlanes()
	if len(cps) == 1 {
		return cps[0], nil
	}
	var errs []error
	for _, n := range cps {
		info, err := c.docker.InspectContainer(ctx, n.id)
		if err == nil && info.Running {
			return n, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, fmt.Errorf("cluster %s: no control plane is running: %w", c.name, errors.Join(errs...))
}
