package kindtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// The names of what kindtest makes, every one of them: the cluster (its
// network carries the cluster's name), its node containers and their /var
// volumes, its sidecar containers (registry, load balancer), the marker
// volume of a kept cluster, a pool's offer volume and a claim record, the
// reuse lock file, the engine's reaper
// container and the namespaces of Namespace. Everything else finds them by
// label (see labels.go), never by name.

// newClusterName makes a short, unique, DNS-label-safe name: the prefix and
// eight hex digits of a random UUID.
func newClusterName(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
}

// nodeName names node index i of a cluster: index 0 is the control plane.
func nodeName(cluster string, i int) string {
	if i == 0 {
		return cluster + "-control-plane"
	}
	if i == 1 {
		return cluster + "-worker"
	}
	return fmt.Sprintf("%s-worker%d", cluster, i)
}

// controlPlaneName names the i-th control plane (from 0) of a cluster.
func controlPlaneName(cluster string, i int) string {
	if i == 0 {
		return cluster + "-control-plane"
	}
	return fmt.Sprintf("%s-control-plane%d", cluster, i+1)
}

// varVolumeName names the volume mounted at /var in a node container.
func varVolumeName(node string) string { return node + "-var" }

// markerVolumeName names the volume that marks a cluster kept (see
// markKept); the sweep and the reaper know it by the same rule.
func markerVolumeName(cluster string) string { return lifetime.MarkerVolume(cluster) }

// claimName names the claim record of a cluster claimed from a pool (see
// createClaim): a container, so that the engine gives the name once.
func claimName(cluster string) string { return cluster + "-claim" }

// poolReadyName names the volume by which a pool offers a ready cluster.
func poolReadyName(cluster string) string { return cluster + "-pool-ready" }

// loadBalancerName names the cluster's load-balancer container.
func loadBalancerName(cluster string) string { return cluster + "-lb" }

// registryAlias is the registry container's name on every cluster's own
// network.
const registryAlias = "kindtest-registry"

// registryName names the cluster's registry container; nodes reach it by
// this name on the cluster's network.
func registryName(cluster string) string { return cluster + "-registry" }

// reuseLockPath is where the lock file of a cluster lives; removing the
// cluster removes it too.
func reuseLockPath(cluster string) string {
	return filepath.Join(os.TempDir(), "kindtest-reuse", cluster+".lock")
}

// defaultReaperName is the name of the engine's one reaper container,
// shared by every test process that uses the engine; the suffix is the
// protocol version. Tests of the reaper's own start give their child
// processes reapers of their own (proc.reaperName).
const defaultReaperName = "kindtest-reaper-2"

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// namespaceName derives a namespace name from a test name: lowercase
// letters, digits and '-', the end of the test name (where subtests are)
// when it is too long, and a random suffix; at most 63 characters.
func namespaceName(test string) string {
	const suffixLen = 6
	base := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if max := 63 - suffixLen - 1; len(base) > max {
		base = strings.TrimLeft(base[len(base)-max:], "-")
	}
	if base == "" {
		base = "test"
	}
	var b [suffixLen / 2]byte
	_, _ = rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}
