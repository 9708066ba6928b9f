//go:build enginematrix

package enginetest_test

import (
	"context"
	"os"
	"testing"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/kindtest"
)

// matrixTests are the library's engine tests that run on every engine of
// the matrix: node lifecycle, exec, LoadImage (single- and
// multi-platform), Kubernetes, and cleanup: after a cancelled create, by
// the sweep, and by the reaper after kill -9.
var matrixTests = []string{"TestNodeLifecycle", "TestExec", "TestLoadImagePlatforms", "TestKubernetes",
	"TestCancelMidCreateLeavesNothing", "TestPruneOrphans", "TestKilledProcessLeavesNothing"}

// TestEngineMatrix runs the library's engine tests against Debian trixie's
// Docker 26, once with the classic image store and once with the
// containerd image store. The test process runs in the engine's network
// namespace: for it, the engine is on the local host, as for a developer
// whose Docker is at /var/run/docker.sock.
func TestEngineMatrix(t *testing.T) {
	host := enginetest.Client(t)
	node := nodeImage(t, host)
	bin := enginetest.BuildTests(t, "./kindtest")
	for _, mode := range []struct {
		name       string
		containerd bool
	}{{"classic-store", false}, {"containerd-store", true}} {
		t.Run(mode.name, func(t *testing.T) {
			e := enginetest.StartEngine(t, host, enginetest.EngineConfig{
				ContainerdStore: mode.containerd,
				Images:          []string{node, kindtest.ReaperImage},
			})
			enginetest.RunTests(t, e.NetNS(), bin, []string{
				"DOCKER_HOST=" + e.Host,
				"KINDTEST_IMAGE=" + node,
				"CI=true",
			}, matrixTests)
		})
	}
}

// nodeImage is the node image the tests use, which must exist on host
// with the reaper image.
func nodeImage(t *testing.T, host *docker.Client) string {
	t.Helper()
	node := kindtest.DefaultImage
	if v := os.Getenv("KINDTEST_IMAGE"); v != "" {
		node = v
	}
	for _, ref := range []string{node, kindtest.ReaperImage} {
		if _, err := host.InspectImage(context.Background(), ref); err != nil {
			t.Fatalf("%s: %v (build it with `go run ./cmd/kindtest build`)", ref, err)
		}
	}
	return node
}
