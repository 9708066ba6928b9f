// What creation is made of: its phases, by name, and the creation value
// the phases hand each other.

package kindtest

import (
	"context"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
)

// Phase names one phase of cluster creation. The same name is in the
// progress log ("kindtest: NAME: boot done in 1.2s"), in Timings and in
// `kindtest bench`.
type Phase string

// The phases of creation, in the order they start. Every cluster goes
// through sweep to boot; with Kubernetes (the default) init and kubeconfig
// run beside boot, then the rest follow.
const (
	// PhaseSweep starts, once per process and in the background, the
	// removal of clusters whose owner is gone.
	PhaseSweep Phase = "sweep"
	// PhaseReaper registers the cluster with the engine's reaper (started
	// if none runs), before anything of the cluster exists.
	PhaseReaper Phase = "reaper"
	// PhaseNetwork creates the cluster's network.
	PhaseNetwork Phase = "network"
	// PhaseContainers creates and starts the node containers (their
	// entrypoint waits for the boot signal), the registry and the load
	// balancer.
	PhaseContainers Phase = "containers"
	// PhaseProvision prepares every node before systemd starts: /sys
	// read-only, cgroups, shared mounts, machine id, registry hosts, pod
	// network and DNS, and on the control plane kubeadm's files and the
	// add-on manifests.
	PhaseProvision Phase = "provision"
	// PhaseBoot sends the boot signal and waits until systemd runs on
	// every node.
	PhaseBoot Phase = "boot"
	// PhaseInit runs kubeadm init on the first control plane, beside boot.
	PhaseInit Phase = "init"
	// PhaseKubeconfig fetches the admin kubeconfig (written before boot)
	// and points it at the API server's published address, beside init.
	PhaseKubeconfig Phase = "kubeconfig"
	// PhaseJoin joins the workers and the other control planes; clusters
	// of one node skip it.
	PhaseJoin Phase = "join"
	// PhaseReady waits until the cluster is ready (see WaitReady).
	PhaseReady Phase = "ready"
	// PhaseAPIServer replaces PhaseReady WithoutDefaultCNI: it waits only
	// for the API server and for every node to register with its pod
	// range, the nodes' readiness waiting for the test's CNI plugin.
	PhaseAPIServer Phase = "api server"
	// PhaseLateAddons starts applying the storage provisioner and the
	// NetworkPolicy agent in the background; nothing waits for them.
	PhaseLateAddons Phase = "late add-ons"
)

// PhaseTiming is how long one phase of cluster creation took.
type PhaseTiming struct {
	Phase    Phase
	Duration time.Duration
}

// settled returns a context for requests that create engine objects: not
// cancelled with ctx, so that a request is never abandoned half-way, but
// bounded by the create timeout (a fixed minute was too short on a slow
// engine: under emulation one container start took longer).
func settled(ctx context.Context, createTimeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
}

// creation is what one creation hands from step to step, the way kind's
// actions share an ActionContext: made by prepare, passed to setup and
// through every phase, dropped when creation ends. Nothing of it stays on
// the handle but the timings.
type creation struct {
	// kubernetesVersion is what the node image carries, from its label.
	kubernetesVersion string
	// cgroupV2 says the engine runs its containers on a cgroup v2 host,
	// which decides how the nodes are made.
	cgroupV2 bool
	// rootless says the engine runs rootless: its nodes are in a user
	// namespace (see rootless.go).
	rootless bool
	// token is the kubeadm bootstrap token the other nodes join with.
	token string
	// addons are the kube-proxy and CoreDNS objects, created during init.
	addons []bootstrap.Object
	// prebootFiles are files of the first control plane, by path, that it
	// printed before boot (the admin's and super-admin's kubeconfigs).
	prebootFiles map[string]string

	timingsMu sync.Mutex // phases may run side by side
	timings   []PhaseTiming
}
