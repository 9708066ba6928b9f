//go:build enginematrix

package enginetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/kindtest"
)

// TestIPFamilyEngines runs the dual-stack and IPv6-only clusters of
// TestIPFamilies on Docker 29 and podman 5 with IPv6 on in their network
// namespaces, and checks that an engine whose host has IPv6 off refuses an
// IPv6 cluster before boot, with the error saying what to change and
// nothing left behind.
func TestIPFamilyEngines(t *testing.T) {
	host := enginetest.Client(t)
	node := nodeImage(t, host)
	images := []string{node, kindtest.ReaperImage}
	bin := enginetest.BuildTests(t, "./kindtest")
	for _, r := range []enginetest.Release{enginetest.Docker29, enginetest.Podman5} {
		t.Run(string(r), func(t *testing.T) {
			e := enginetest.StartEngine(t, host, enginetest.EngineConfig{Release: r, ContainerdStore: r == enginetest.Docker29, IPv6: true, Images: images})
			enginetest.RunTests(t, e.NetNS(), bin, []string{"DOCKER_HOST=" + e.Host, "KINDTEST_IMAGE=" + node, "CI=true"}, []string{"TestIPFamilies"})
		})
	}

	for _, r := range []enginetest.Release{enginetest.Docker29, enginetest.Podman5} {
		t.Run(string(r)+" without IPv6", func(t *testing.T) {
			e := enginetest.StartEngine(t, host, enginetest.EngineConfig{Release: r, ContainerdStore: r == enginetest.Docker29, Images: images})
			// Creation must stop before the API server is needed, so this
			// process need not be in the engine's network namespace.
			t.Setenv("DOCKER_HOST", e.Host)
			t.Setenv("KINDTEST_REAPER", "off")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c, err := kindtest.New(ctx, kindtest.WithImage(node), kindtest.WithIPFamily(kindtest.IPv6))
			if err == nil {
				c.Delete(context.Background())
				t.Fatal("an IPv6 cluster was made on an engine whose host has IPv6 off")
			}
			t.Logf("refused: %v", err)
			for _, want := range []string{"WithIPFamily(ipv6)", "disable_ipv6=0"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q", want)
				}
			}
			any := map[string]string{kindtest.LabelCluster: ""}
			ctrs, err1 := e.Client.ListContainers(ctx, any)
			nets, err2 := e.Client.ListNetworks(ctx, any)
			vols, err3 := e.Client.ListVolumes(ctx, any)
			if err1 != nil || err2 != nil || err3 != nil || len(ctrs)+len(nets)+len(vols) != 0 {
				t.Errorf("left after the refusal: %d containers, %d networks, %d volumes (%v %v %v)", len(ctrs), len(nets), len(vols), err1, err2, err3)
			}
		})
	}
}
