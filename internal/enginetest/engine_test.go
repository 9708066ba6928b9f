//go:build enginematrix

package enginetest_test

import (
	"context"
	"os"
	"testing"
	"time"

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

// matrixEngineTests are internal/docker's engine tests that run on every
// engine of the matrix: an image of another platform imported, built on,
// saved, renamed and loaded back under the name the archive gives (podman
// reports localhost/NAME for it), as `kindtest build -platform` and
// `kindtest image load` need.
var matrixEngineTests = []string{"TestForeignPlatformImage"}

// TestEngineMatrix runs the library's engine tests against each test
// engine, with each image store: Debian trixie's Docker 26 with the
// classic store (its default) and the containerd store, and Docker 29
// built from github.com/moby/moby/v2 with the containerd store (its
// default) and the classic store, and rootful podman through its
// Docker-compatible API: Debian trixie's 5.4 and bookworm's 4.3, with
// podman's own image store. The test process runs in the engine's
// network namespace: for it, the engine is on the local host, as for a
// developer whose Docker is at /var/run/docker.sock. Before the tests,
// api-version checks what the client negotiated with the engine.
func TestEngineMatrix(t *testing.T) {
	host := enginetest.Client(t)
	node := nodeImage(t, host)
	bin := enginetest.BuildTests(t, "./kindtest")
	engineBin := enginetest.BuildTests(t, "./internal/docker")
	for _, engine := range []struct {
		release enginetest.Release
		stores  []string
	}{
		{enginetest.Docker26, []string{"classic-store", "containerd-store"}},
		{enginetest.Docker29, []string{"containerd-store", "classic-store"}},
		{enginetest.Podman5, []string{"containers-storage"}},
		{enginetest.Podman4, []string{"containers-storage"}},
	} {
		t.Run(string(engine.release), func(t *testing.T) {
			for _, store := range engine.stores {
				t.Run(store, func(t *testing.T) {
					e := enginetest.StartEngine(t, host, enginetest.EngineConfig{
						Release:         engine.release,
						ContainerdStore: store == "containerd-store",
						Images:          []string{node, kindtest.ReaperImage},
					})
					t.Run("api-version", func(t *testing.T) { checkAPIVersion(t, e) })
					env := []string{"DOCKER_HOST=" + e.Host, "KINDTEST_IMAGE=" + node, "CI=true"}
					t.Run("tests", func(t *testing.T) { enginetest.RunTests(t, e.NetNS(), bin, env, matrixTests) })
					t.Run("engine-tests", func(t *testing.T) { enginetest.RunTests(t, e.NetNS(), engineBin, env, matrixEngineTests) })
				})
			}
		})
	}
}

// checkAPIVersion checks that the client settled on the newest Engine API
// both it and the engine speak, and logs the versions: the engine's own,
// the range of API versions it serves, and the negotiated one.
func checkAPIVersion(t *testing.T, e *enginetest.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := e.Client.APIVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Docker %s serves API %s to %s; the client (SDK up to %s) negotiated %s", v.EngineVersion, v.EngineMin, v.Engine, docker.SDKAPIVersion, v.Negotiated)
	if err := v.Check(); err != nil {
		t.Error(err)
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
