package kindtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

func TestKubernetes(t *testing.T) {
	dc := engine(t)
	echo, err := fixture.BuildEcho(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := fixture.Manifest("echo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// KINDTEST_IMAGE may carry another Kubernetes version (the version
	// matrix in the README): its label says which.
	version := kindtest.KubernetesVersion
	if img, err := dc.InspectImage(context.Background(), nodeImage(t, dc)); err == nil && img.Labels["dev.kindtest.image.kubernetes-version"] != "" {
		version = img.Labels["dev.kindtest.image.kubernetes-version"]
	}
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			c := start(t, dc, kindtest.WithWorkers(workers))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()

			t.Run("component serving certificates", func(t *testing.T) { checkServingCertificates(ctx, t, c.ControlPlane()) })
			t.Run("kubelet OOM score", func(t *testing.T) {
				// The kubelet sets the score it is configured with at once
				// (-999, or the node's own where the node cannot lower it);
				// a refused write cost two tries 100 ms apart.
				for _, n := range c.Nodes() {
					res, err := n.Exec(ctx, "sh", "-c", `journalctl -u kubelet --no-pager | grep -c "Failed to ApplyOOMScoreAdj" || true`)
					if err != nil || strings.TrimSpace(res.Stdout) != "0" {
						t.Errorf("%s: the kubelet could not set its OOM score (%q lines, %v)", n.Name(), res.Stdout, err)
					}
				}
			})
			t.Run("nodes", func(t *testing.T) {
				res, err := c.Kubectl(ctx, "get", "nodes", "-o",
					`jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
				if len(lines) != workers+1 {
					t.Fatalf("nodes:\n%s\nwant %d", res.Stdout, workers+1)
				}
				for _, l := range lines {
					f := strings.Fields(l)
					if len(f) != 3 || f[1] != version || f[2] != "True" {
						t.Errorf("node %q: want version %s and Ready", l, version)
					}
				}
				// One CoreDNS replica per node, at most two.
				want := fmt.Sprintf("%d/%d", min(workers+1, 2), min(workers+1, 2))
				res, err = c.Kubectl(ctx, "-n", "kube-system", "get", "deployment", "coredns", "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}")
				if err != nil || res.Stdout != want {
					t.Errorf("CoreDNS ready replicas %q (%v), want %s", res.Stdout, err, want)
				}
			})

			if err := c.LoadImage(ctx, echo); err != nil {
				t.Fatal(err)
			}
			for _, n := range c.Nodes() {
				if _, err := n.Exec(ctx, "ctr", "-n", "k8s.io", "images", "check", "name=="+dockerRef(echo)); err != nil {
					t.Errorf("%s: echo image not loaded: %v", n.Name(), err)
				}
			}
			if err := c.Apply(ctx, manifest); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Kubectl(ctx, "rollout", "status", "deployment/echo", "--timeout=3m"); err != nil {
				t.Fatal(err)
			}
			pods := echoPods(ctx, t, c)

			t.Run("spread", func(t *testing.T) {
				nodes := map[string]bool{}
				for _, p := range pods {
					nodes[p.node] = true
				}
				want := 1
				if workers > 0 {
					want = workers // the control plane keeps its taint
				}
				if len(nodes) != want {
					t.Errorf("3 replicas on %d node(s) %v, want %d", len(nodes), nodes, want)
				}
			})

			t.Run("pod to pod", func(t *testing.T) {
				from := pods[0]
				for _, to := range pods {
					out, err := c.PodExec(ctx, "default", from.name, "", "/echo", "get", "http://"+to.ip+":8080/p2p")
					if err != nil || !strings.Contains(out.Stdout, "pod="+to.name) {
						t.Errorf("%s (%s) to %s (%s): %q %v", from.name, from.node, to.name, to.node, out.Stdout, err)
					}
				}
			})

			t.Run("service by DNS name", func(t *testing.T) {
				checkServiceDNS(ctx, t, c, pods)
				out, err := c.PodExec(ctx, "default", pods[0].name, "", "/echo", "lookup", "kubernetes.default.svc.cluster.local")
				if err != nil || strings.TrimSpace(out.Stdout) != "10.96.0.1" {
					t.Errorf("lookup kubernetes.default: %q %v", out.Stdout, err)
				}
			})

			t.Run("node port", func(t *testing.T) { checkNodePorts(ctx, t, c, nil) })

			t.Run("host kubectl", func(t *testing.T) {
				kubectl := hostKubectl(t)
				if _, err := os.Stat(c.KubeconfigPath()); err != nil {
					t.Fatal(err)
				}
				// Where the test process stands decides the address: the
				// engine tests for remote engines and for test processes in
				// a container say which they expect.
				want := "127.0.0.1"
				switch v := os.Getenv(apiHostEnv); v {
				case "":
				case "control-plane":
					want = c.ControlPlane().IP()
				default:
					want = v
				}
				if !strings.HasPrefix(c.APIServer(), "https://"+want+":") || !strings.Contains(string(c.Kubeconfig()), "server: "+c.APIServer()) {
					t.Errorf("kubeconfig server %s, want %s", c.APIServer(), want)
				}
				out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.KubeconfigPath(), "get", "pods", "-l", "app=echo", "-o", "name").CombinedOutput()
				if err != nil || strings.Count(string(out), "pod/echo-") != 3 {
					t.Errorf("host kubectl: %s %v", out, err)
				}
			})

			if workers == 0 {
				// The API server calls out to the test process: a remote
				// engine's nodes cannot reach it, and it says so.
				t.Run("host server", func(t *testing.T) {
					switch os.Getenv(apiHostEnv) {
					case "", "control-plane":
						testHostServer(ctx, t, c)
					default:
						_, err := c.ServeHTTPS(ctx, http.NotFoundHandler())
						if err == nil || !strings.Contains(err.Error(), "remote engine") || !strings.Contains(err.Error(), "run the test process in a container") {
							t.Errorf("ServeHTTPS against a remote engine: %v, want an error saying why and what to do", err)
						}
					}
				})
			}
		})
	}
}

// apiHostEnv names the host the API server's address must have: unset
// means 127.0.0.1, "control-plane" the control plane's address on the
// cluster network (a test process inside a container of the engine).
const apiHostEnv = "KINDTEST_TEST_API_HOST"

// dockerRef is the name containerd files a Docker short reference under.
func dockerRef(ref string) string {
	if strings.Count(strings.Split(ref, ":")[0], "/") == 1 {
		return "docker.io/" + ref
	}
	return ref
}

type pod struct{ name, node, ip string }

func echoPods(ctx context.Context, t *testing.T, c *kindtest.Cluster) []pod {
	t.Helper()
	res, err := c.Kubectl(ctx, "get", "pods", "-l", "app=echo", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	var pods []pod
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			pods = append(pods, pod{f[0], f[1], f[2]})
		}
	}
	if len(pods) != 3 {
		t.Fatalf("echo pods:\n%s", res.Stdout)
	}
	return pods
}

// hostKubectl finds a kubectl on the host: on PATH, or the one the node
// image build left in its cache.
func hostKubectl(t *testing.T) string {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if dir, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(dir, "kindtest", "bin", kindtest.KubernetesVersion, "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no kubectl on the host: neither on PATH nor in the node image build cache")
	return ""
}

// retry calls fn every half second until it succeeds or 30 s pass, for
// what Kubernetes makes true a moment later (kube-proxy rules), and returns
// the last error.
func retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
