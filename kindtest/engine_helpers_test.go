package kindtest_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// engine returns a client for tests that need a real Docker engine. Without
// one they skip, except under CI, where that is a failure.
func engine(t *testing.T) *docker.Client {
	t.Helper()
	return enginetest.Client(t)
}

// nodeImage is the image lifecycle tests run: KINDTEST_IMAGE or the
// default node image, which must have been built.
func nodeImage(t *testing.T, dc *docker.Client) string {
	t.Helper()
	ref := kindtest.Image()
	if _, err := dc.InspectImage(context.Background(), ref); err != nil {
		t.Fatalf("node image %s: %v (build it with `go run ./cmd/kindtest build`)", ref, err)
	}
	return ref
}

// leftovers counts the containers, volumes and networks that still carry
// the given labels.
func leftovers(t *testing.T, dc *docker.Client, labels map[string]string) int {
	t.Helper()
	ctx := context.Background()
	cs, err := dc.ListContainers(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := dc.ListVolumes(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := dc.ListNetworks(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Logf("left: container %s", c.Name)
	}
	for _, v := range vs {
		t.Logf("left: volume %s", v.Name)
	}
	for _, n := range ns {
		t.Logf("left: network %s", n.Name)
	}
	return len(cs) + len(vs) + len(ns)
}

// start is kindtest.Start that also checks, after the cluster's own
// cleanup has run, that nothing carrying its label remains.
func start(t *testing.T, dc *docker.Client, opts ...kindtest.Option) *kindtest.Cluster {
	t.Helper()
	var name string
	// Registered before Start's cleanup, so it runs after it.
	t.Cleanup(func() {
		if name == "" {
			return
		}
		if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: name}); n != 0 {
			t.Errorf("cluster %s: %d resource(s) left after the test", name, n)
		}
		if dirs := workDirsOf(t, name); len(dirs) != 0 {
			t.Errorf("cluster %s: kubeconfig directories left after the test: %q", name, dirs)
		}
	})
	c := kindtest.Start(t, append([]kindtest.Option{kindtest.WithImage(nodeImage(t, dc))}, opts...)...)
	name = c.Name()
	return c
}

// workDirsOf lists the directories in os.TempDir() that hold a handle's
// kubeconfig for cluster name.
func workDirsOf(t *testing.T, name string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "kindtest-"+name+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// pruneOrphans runs the sweep as `kindtest prune` does. A failure to
// remove another test's or run's orphan (an engine that cannot kill a
// container) is logged, not this test's failure; one naming a cluster of
// this test is.
func pruneOrphans(t *testing.T, own ...string) []string {
	t.Helper()
	names, err := kindtest.Prune(context.Background(), kindtest.PruneOrphans)
	if err != nil {
		for _, n := range own {
			if strings.Contains(err.Error(), n) {
				t.Errorf("sweep: %v", err)
				return names
			}
		}
		t.Logf("sweep (not this test's clusters): %v", err)
	}
	return names
}

// echoApp builds the echo image and reads its manifest (a Deployment of
// three pods, a ClusterIP Service and a NodePort Service on 30080).
func echoApp(t *testing.T) (image string, manifest []byte) {
	t.Helper()
	image, err := fixture.BuildEcho(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifest, err = fixture.Manifest("echo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return image, manifest
}

// deployEcho loads the echo image into every node, applies its manifest
// with the extra documents, and returns the pods once the Deployment is
// available.
func deployEcho(ctx context.Context, t *testing.T, c *kindtest.Cluster, image string, manifest []byte, extra ...string) []pod {
	t.Helper()
	if err := c.LoadImage(ctx, image); err != nil {
		t.Fatal(err)
	}
	for _, doc := range extra {
		manifest = append(manifest, "\n---\n"+doc...)
	}
	if err := c.Apply(ctx, manifest); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, "default", "deployment/echo", kindtest.Available); err != nil {
		t.Fatal(err)
	}
	return echoPods(ctx, t, c)
}

// checkServiceDNS gets the echo Service by its DNS name from each pod.
// kube-proxy programs the Service a moment after the rollout is done, so
// each try is retried.
func checkServiceDNS(ctx context.Context, t *testing.T, c *kindtest.Cluster, pods []pod) {
	t.Helper()
	for _, p := range pods {
		getFromPod(ctx, t, c, p, "http://echo.default.svc.cluster.local/svc", "path=/svc")
	}
}

// getFromPod gets url from pod p with the echo binary, retried, and
// checks the answer holds want.
func getFromPod(ctx context.Context, t *testing.T, c *kindtest.Cluster, p pod, url, want string) {
	t.Helper()
	var out kindtest.ExecResult
	err := retry(ctx, func() (err error) {
		out, err = c.PodExec(ctx, "default", p.name, "", "/echo", "get", url)
		return err
	})
	if err != nil || !strings.Contains(out.Stdout, want) {
		t.Errorf("GET %s from %s on %s: %q %v", url, p.name, p.node, out.Stdout, err)
	}
}

// checkNodePorts gets the echo NodePort (30080) on each node, from the
// node itself, at the node's address ip gives (Node.IP when nil).
func checkNodePorts(ctx context.Context, t *testing.T, c *kindtest.Cluster, ip func(*kindtest.Node) string) {
	t.Helper()
	if ip == nil {
		ip = (*kindtest.Node).IP
	}
	for _, n := range c.Nodes() {
		var out kindtest.ExecResult
		err := retry(ctx, func() (err error) {
			out, err = n.Exec(ctx, "curl", "-sS", "--max-time", "5", "http://"+net.JoinHostPort(ip(n), "30080")+"/np")
			return err
		})
		if err != nil || !strings.Contains(out.Stdout, "path=/np") {
			t.Errorf("NodePort on %s: %q %v", n.Name(), out.Stdout, err)
		}
	}
}

// checkServingCertificates checks that the controller-manager and the
// scheduler on control plane n serve /healthz with the certificates
// kindtest gave them (curl trusts only the CA in that certificate file),
// not ones they made themselves.
func checkServingCertificates(ctx context.Context, t *testing.T, n *kindtest.Node) {
	t.Helper()
	for component, port := range map[string]string{"kube-controller-manager": "10257", "kube-scheduler": "10259"} {
		res, err := n.Exec(ctx, "curl", "-sS", "--max-time", "5", "--cacert", "/etc/kubernetes/serving/"+component+".crt",
			"https://localhost:"+port+"/healthz")
		if err != nil || res.Stdout != "ok" {
			t.Errorf("%s on %s: /healthz with kindtest's certificate: %q (%v)", component, n.Name(), res.Stdout, err)
		}
	}
}
