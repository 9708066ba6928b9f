package kindtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/imageref"
	"github.com/kindtest/kindtest/kindtest"
)

// shellImage is a preloaded image with a shell: the provisioner's, which
// also runs its helper pods.
const shellImage = imageref.LocalPathProvisioner

// TestStorage runs one cluster of a control plane and two workers: a claim
// without a class, made as soon as Start returns (perhaps before the class
// exists), binds to the default one; a StatefulSet gets a volume per
// replica, data outlives its pod, and a deleted claim's directory goes. The
// start helper checks that nothing is left on the engine after Delete.
func TestStorage(t *testing.T) {
	dc := engine(t)
	c := start(t, dc, kindtest.WithWorkers(2))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	t.Run("claim without class", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Mi
---
apiVersion: v1
kind: Pod
metadata:
  name: writer
spec:
  restartPolicy: Never
  containers:
  - name: writer
    image: %s
    imagePullPolicy: Never
    command: [sh, -c, "echo written-by-writer > /data/hello"]
    volumeMounts:
    - name: data
      mountPath: /data
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: data
`, shellImage)
		if err := c.Apply(ctx, []byte(manifest)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "wait", "pod/writer", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=3m"); err != nil {
			t.Fatalf("writer pod: %v\n%s", err, describe(ctx, c, "pod/writer", "pvc/data"))
		}
		pvc, err := c.Kubectl(ctx, "get", "pvc", "data", "-o", "jsonpath={.status.phase} {.spec.storageClassName} {.spec.volumeName}")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(pvc.Stdout)
		if len(f) != 3 || f[0] != "Bound" || f[1] != kindtest.StorageClassName {
			t.Fatalf("claim: %q, want Bound to class %s", pvc.Stdout, kindtest.StorageClassName)
		}
		path, err := c.Kubectl(ctx, "get", "pv", f[2], "-o", "jsonpath={.spec.hostPath.path}")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(path.Stdout, kindtest.StorageRoot+"/") {
			t.Fatalf("volume path %q, want one under %s", path.Stdout, kindtest.StorageRoot)
		}
		node := podNode(ctx, t, c, "writer")
		got, err := node.Exec(ctx, "cat", path.Stdout+"/hello")
		if err != nil || got.Stdout != "written-by-writer\n" {
			t.Fatalf("%s:%s/hello: %q (%v)", node.Name(), path.Stdout, got.Stdout, err)
		}

		// Reclaim policy Delete: the helper pod removes the directory.
		if _, err := c.Kubectl(ctx, "delete", "pod/writer", "pvc/data", "--wait=true", "--timeout=1m"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "wait", "pv/"+f[2], "--for=delete", "--timeout=2m"); err != nil {
			t.Fatalf("volume %s not deleted: %v\n%s", f[2], err, describe(ctx, c, "pv/"+f[2]))
		}
		if _, err := node.Exec(ctx, "test", "!", "-e", path.Stdout); err != nil {
			t.Errorf("%s: %s still there after its volume was deleted", node.Name(), path.Stdout)
		}
	})

	t.Run("default class", func(t *testing.T) {
		res, err := c.Kubectl(ctx, "get", "storageclass", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.storageclass\.kubernetes\.io/is-default-class} {.volumeBindingMode} {.reclaimPolicy}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		if want := kindtest.StorageClassName + " true WaitForFirstConsumer Delete\n"; res.Stdout != want {
			t.Fatalf("storage classes:\n%s\nwant %q", res.Stdout, want)
		}
		// It reaches the API server directly: no failed first start.
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "wait", "--for=create", "deployment/local-path-provisioner", "--timeout=1m"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "deployment/local-path-provisioner", "--timeout=2m"); err != nil {
			t.Fatalf("provisioner not running: %v\n%s", err, describe(ctx, c, "-n", "kube-system", "deployment/local-path-provisioner"))
		}
		res, err = c.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-l", "app=local-path-provisioner", "-o", "jsonpath={.items[*].status.containerStatuses[*].restartCount}")
		if err != nil || res.Stdout != "0" {
			t.Errorf("provisioner restarts: %q (%v), want 0", res.Stdout, err)
		}
	})

	t.Run("statefulset", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 2
  serviceName: web
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: web
        image: %s
        imagePullPolicy: Never
        command: [sh, -c, "test -e /data/id || echo \"$HOSTNAME $(date +%%s%%N)\" > /data/id; exec sleep infinity"]
        readinessProbe:
          exec:
            command: [test, -e, /data/id]
          periodSeconds: 1
        volumeMounts:
        - name: data
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Mi
`, shellImage)
		if err := c.Apply(ctx, []byte(manifest)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "rollout", "status", "statefulset/web", "--timeout=3m"); err != nil {
			t.Fatalf("statefulset not ready: %v\n%s", err, describe(ctx, c, "statefulset/web", "pods", "pvc"))
		}
		res, err := c.Kubectl(ctx, "get", "pvc", "-l", "app=web", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "data-web-0 Bound\ndata-web-1 Bound\n" {
			t.Fatalf("claims:\n%s", res.Stdout)
		}
		before, err := c.PodExec(ctx, "default", "web-0", "web", "cat", "/data/id")
		if err != nil {
			t.Fatal(err)
		}
		uid, err := c.Kubectl(ctx, "get", "pod", "web-0", "-o", "jsonpath={.metadata.uid}")
		if err != nil {
			t.Fatal(err)
		}

		t.Run("data survives a pod restart", func(t *testing.T) {
			if _, err := c.Kubectl(ctx, "delete", "pod", "web-0", "--wait=true"); err != nil {
				t.Fatal(err)
			}
			// The StatefulSet makes web-0 again: wait for a new one, Ready.
			err := poll(ctx, func() bool {
				res, err := c.Kubectl(ctx, "get", "pod", "web-0", "-o", "jsonpath={.metadata.uid}")
				return err == nil && res.Stdout != "" && res.Stdout != uid.Stdout
			})
			if err != nil {
				t.Fatalf("web-0 not recreated: %v", err)
			}
			if _, err := c.Kubectl(ctx, "wait", "pod/web-0", "--for=condition=Ready", "--timeout=2m"); err != nil {
				t.Fatalf("web-0 not ready again: %v\n%s", err, describe(ctx, c, "pod/web-0"))
			}
			after, err := c.PodExec(ctx, "default", "web-0", "web", "cat", "/data/id")
			if err != nil {
				t.Fatal(err)
			}
			if after.Stdout != before.Stdout || !strings.HasPrefix(before.Stdout, "web-0 ") {
				t.Fatalf("/data/id was %q, is %q after the restart", before.Stdout, after.Stdout)
			}
		})
	})
}

// TestWithoutStorage: no StorageClass and no provisioner.
func TestWithoutStorage(t *testing.T) {
	dc := engine(t)
	c := start(t, dc, kindtest.WithoutStorage())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Kubectl(ctx, "get", "storageclass", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "" {
		t.Errorf("storage classes: %q, want none", res.Stdout)
	}
	res, err = c.Kubectl(ctx, "-n", "kube-system", "get", "deployments", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(res.Stdout) != "deployment.apps/coredns" {
		t.Errorf("kube-system deployments: %q, want only CoreDNS", res.Stdout)
	}
}

// podNode returns the node a pod runs on.
func podNode(ctx context.Context, t *testing.T, c *kindtest.Cluster, pod string) *kindtest.Node {
	t.Helper()
	res, err := c.Kubectl(ctx, "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}")
	if err != nil {
		t.Fatal(err)
	}
	n := c.Node(res.Stdout)
	if n == nil {
		t.Fatalf("pod %s on %q, not a node of the cluster", pod, res.Stdout)
	}
	return n
}

// describe is what a failed wait shows: kubectl describe of the objects.
func describe(ctx context.Context, c *kindtest.Cluster, objects ...string) string {
	res, _ := c.Kubectl(context.WithoutCancel(ctx), append([]string{"describe"}, objects...)...)
	logs, _ := c.Kubectl(context.WithoutCancel(ctx), "-n", "kube-system", "logs", "deployment/local-path-provisioner", "--tail=30")
	return res.Stdout + res.Stderr + "\nprovisioner logs:\n" + logs.Stdout + logs.Stderr
}

// poll calls cond every 200 ms until it holds or ctx ends.
func poll(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
