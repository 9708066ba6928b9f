// Package e2e is kindtest's main example: a plain `go test` that gets a
// three-node Kubernetes cluster, loads a locally built image into it,
// deploys a workload and checks it the ways a user would, from a pod
// through the Service's DNS name and from a node through a NodePort.
//
//	go test ./examples/e2e/...
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

func TestEchoService(t *testing.T) {
	if testing.Short() {
		t.Skip("engine test: needs a Docker engine and the node image; skipped under -short")
	}
	// One control plane and two workers; removed when the test ends,
	// however it ends.
	cluster := kindtest.Start(t, kindtest.WithWorkers(2))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The workload's image is built on the host and streamed into every
	// node: nothing is pulled from a registry.
	image, err := fixture.BuildEcho(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.LoadImage(ctx, image); err != nil {
		t.Fatal(err)
	}
	manifest, err := fixture.Manifest("echo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Apply(ctx, manifest); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Kubectl(ctx, "rollout", "status", "deployment/echo", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}

	// A client pod, separate from the workload, on whichever node the
	// scheduler picks.
	if _, err := cluster.Kubectl(ctx, "run", "client", "--image="+image, "--image-pull-policy=Never",
		"--restart=Never", "--command", "--", "/echo", "serve", "-addr", ":9090"); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/client", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}

	t.Run("service DNS name from a pod", func(t *testing.T) {
		// kube-proxy programs a new Service's endpoints a moment after the
		// rollout reports ready: wait for the first answer, do not assume.
		url := "http://echo.default.svc.cluster.local/hello"
		if err := eventually(ctx, 30*time.Second, func() error {
			_, err := cluster.PodExec(ctx, "default", "client", "", "/echo", "get", url)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Three replicas behind the Service: several requests reach more
		// than one of them.
		seen := map[string]bool{}
		for range 20 {
			res, err := cluster.PodExec(ctx, "default", "client", "", "/echo", "get", url)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Stdout, "path=/hello") {
				t.Fatalf("unexpected answer %q", res.Stdout)
			}
			seen[strings.Fields(res.Stdout)[0]] = true
		}
		if len(seen) < 2 {
			t.Errorf("20 requests through the Service reached only %v", seen)
		}
	})

	t.Run("node port from every node", func(t *testing.T) {
		for _, node := range cluster.Nodes() {
			var res kindtest.ExecResult
			err := eventually(ctx, 30*time.Second, func() (err error) {
				res, err = node.Exec(ctx, "curl", "-sS", "--max-time", "5", fmt.Sprintf("http://%s:30080/from-node", node.IP()))
				return err
			})
			if err != nil {
				t.Fatalf("%s: %v", node.Name(), err)
			}
			if !strings.Contains(res.Stdout, "path=/from-node") {
				t.Errorf("%s: unexpected answer %q", node.Name(), res.Stdout)
			}
		}
	})
}

// eventually retries fn every half second until it succeeds or timeout
// passes, and returns its last error.
func eventually(ctx context.Context, timeout time.Duration, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
