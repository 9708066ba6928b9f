package kindtest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
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
	ref := os.Getenv("KINDTEST_IMAGE")
	if ref == "" {
		ref = kindtest.DefaultImage
	}
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
	})
	c := kindtest.Start(t, append([]kindtest.Option{kindtest.WithImage(nodeImage(t, dc))}, opts...)...)
	name = c.Name()
	return c
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
