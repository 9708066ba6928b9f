package bootstrap

import (
	"embed"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// scripts are the shell scripts kindtest runs in nodes; the Command
// functions below give their arguments.
//
//go:embed scripts/*.sh
var scripts embed.FS

// command is the command that runs the script scripts/name with args as
// $1...: SHELL -c TEXT NAME ARGS..., SHELL being the one its #! line
// names, and $0 the script's name in its error messages.
func command(name string, args ...string) []string {
	text, err := scripts.ReadFile("scripts/" + name)
	if err != nil {
		// The names are this package's own; the tests run every one.
		panic("bootstrap: " + err.Error())
	}
	return append([]string{interpreter(string(text)), "-c", string(text), name}, args...)
}

// interpreter is the shell a script's #! line names, sh without one.
func interpreter(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	if !strings.HasPrefix(line, "#!") {
		return "sh"
	}
	return path.Base(strings.TrimSpace(strings.TrimPrefix(line, "#!")))
}

// ProvisionCommand prepares a node before systemd boots: a read-only
// /sys, cgroups (on cgroup v1, binds at the paths the node is told it is
// in and the kubelet's QoS slices in every hierarchy; on cgroup v2, every
// controller for the children), shared mount propagation and a machine
// id: machineID, which a restarted node keeps, or a random one when "".
func ProvisionCommand(machineID string) []string {
	if machineID == "" {
		return command("provision.sh")
	}
	return command("provision.sh", machineID)
}

// NodeNetwork is a node's networking, set up before it boots.
type NodeNetwork struct {
	// PodSubnet is the node's own pod range, on a bridge of kindtest's
	// CNI configuration; "" leaves the pod network to the test's CNI
	// plugin: no CNI configuration, masquerading or routes.
	PodSubnet string
	// ClusterPodSubnet is every node's pod ranges together: traffic from
	// the node's pods leaving it is masqueraded.
	ClusterPodSubnet string
	// Routes lead to the other nodes' pod ranges.
	Routes []Route
	// BridgeNetfilter passes traffic between pods of the node through
	// netfilter, where a NetworkPolicy agent's hooks see it.
	BridgeNetfilter bool
}

// Route is a route to Dst through Via.
type Route struct{ Dst, Via string }

// NodeNetworkCommand sets up a node's networking before it boots: the
// iptables flavour (legacy or nft) that holds the engine's rules, DNS
// served on the network gateway's address (the engine's 127.0.0.11 would
// loop for pods), and n's pod network with CNIConfig at CNIConfigPath.
func NodeNetworkCommand(n NodeNetwork) []string {
	if n.PodSubnet == "" {
		return command("node-network.sh")
	}
	filter := "off"
	if n.BridgeNetfilter {
		filter = "on"
	}
	args := []string{string(CNIConfig(n.PodSubnet)), n.PodSubnet, n.ClusterPodSubnet, filter}
	for _, r := range n.Routes {
		args = append(args, r.Dst, r.Via)
	}
	return command("node-network.sh", args...)
}

// prebootPhases are the kubeadm init phases that only write files: run on
// the control plane before systemd boots, they let the kubelet start the
// control plane's static pods as soon as the node is up, instead of after
// a restart once kubeadm has written them. The init configuration skips
// them (see kubeadm.tmpl).
var prebootPhases = []string{"certs all", "kubeconfig all", "etcd local", "control-plane all", "kubelet-start"}

// The scheduler's static pod manifest, and where it is held back until
// the API server is healthy. A scheduler started beside the API server
// had its lists refused until the RBAC roles were in place, and its
// informers backed off for seconds past that: pods were scheduled only
// seconds after the controllers made them. Started once the API server is
// healthy, it lists at once.
const (
	SchedulerManifest     = "/etc/kubernetes/manifests/kube-scheduler.yaml"
	HeldSchedulerManifest = "/etc/kindtest/held/kube-scheduler.yaml"
)

// KubeadmPrebootCommand runs the kubeadm init phases that only write
// files, with kubeadm's configuration at config, their output and errors
// going to log, then holds the scheduler's manifest back (see
// KubeadmInitCommand).
func KubeadmPrebootCommand(config, log string) []string {
	return command("kubeadm-preboot.sh", append([]string{config, log, SchedulerManifest, HeldSchedulerManifest}, prebootPhases...)...)
}

// KubeadmInit says where kubeadm-init.sh finds and puts things.
type KubeadmInit struct {
	// Config is kubeadm's configuration; Log gets kubeadm's output.
	Config, Log string
	// APIServerPort is where the API server listens in the node.
	APIServerPort int
	// Wrapper is a command kubeadm runs under, as in timeout 2 kubeadm
	// init; none by default. Tests use it to make init fail.
	Wrapper []string
}

// KubeadmInitCommand runs the rest of kubeadm init on the first control
// plane, and releases the scheduler's manifest once the API server is
// healthy; a failure prints kubeadm's last lines.
func KubeadmInitCommand(k KubeadmInit) []string {
	args := []string{k.Config, k.Log, strconv.Itoa(k.APIServerPort), HeldSchedulerManifest, SchedulerManifest}
	return command("kubeadm-init.sh", append(args, k.Wrapper...)...)
}

// LateAddonsCommand starts applying manifests that nothing waits for (the
// storage provisioner, the NetworkPolicy agent) in the background, with
// the admin's kubeconfig, retried for 30 seconds while the API server is
// busy; what kubectl said goes to log. It returns at once.
func LateAddonsCommand(kubeconfig, log string, manifests ...string) []string {
	return command("late-addons.sh", append([]string{kubeconfig, log}, manifests...)...)
}

// CleanNamespacesCommand deletes, with the admin's kubeconfig, what a
// test run may have left in a reused cluster: every namespace but the
// system ones, and every namespaced object in default (custom resources
// included) but the few Kubernetes keeps there.
func CleanNamespacesCommand(kubeconfig string) []string {
	return command("clean-namespaces.sh", kubeconfig)
}

// MemoryCommand prints the node cgroup's memory usage and inactive file
// cache, in bytes, separated by a space.
func MemoryCommand() []string { return command("memory.sh") }

// WaitJobCommand waits, with the admin's kubeconfig, until the Job object
// in namespace is Complete (exit 0) or Failed (exit 3), for at most
// timeout (kubectl's --timeout, e.g. 30s).
func WaitJobCommand(kubeconfig, object, namespace, timeout string) []string {
	return command("wait-job.sh", kubeconfig, object, namespace, timeout)
}

// ImageLabel is a label put on an image in a node's containerd.
type ImageLabel struct {
	// Ref is the image's containerd name (docker.io/library/x:1).
	Ref string
	// Label is key=value.
	Label string
}

// ImportImagesCommand imports the image archive on its stdin into the
// node's containerd, only platform's content, then puts labels on the
// images; an image that cannot be labelled is imported again next time.
func ImportImagesCommand(platform string, labels []ImageLabel) []string {
	args := []string{platform}
	for _, l := range labels {
		args = append(args, l.Ref, l.Label)
	}
	return command("import-images.sh", args...)
}

// RegistryHosts is containerd's host configuration of one registry name:
// its hosts.toml.
type RegistryHosts struct {
	// Name is the registry's name as image references write it
	// (docker.io, localhost:5001), or _default for every registry.
	Name string
	// Server is the registry's own endpoint, pulled from and pushed to,
	// for a registry the cluster serves; "" for a mirrored one.
	Server string
	// Mirrors are endpoints pulled from, tried in order before the
	// registry itself.
	Mirrors []string
}

// TOML renders r as containerd's hosts.toml. The endpoints are URLs,
// which Go's %q quotes as TOML's basic strings do.
func (r RegistryHosts) TOML() string {
	var b strings.Builder
	if r.Server != "" {
		fmt.Fprintf(&b, "server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n", r.Server, r.Server)
	}
	for _, m := range r.Mirrors {
		fmt.Fprintf(&b, "[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n\n", m)
	}
	return b.String()
}

// RegistryHostsCommand writes each of hosts' configuration under dir,
// before boot. With waitName, it then waits up to a minute until the
// registry of that name answers at waitURL, and fails saying so.
func RegistryHostsCommand(dir, waitName, waitURL string, hosts []RegistryHosts) []string {
	args := []string{dir, waitName, waitURL}
	for _, h := range hosts {
		args = append(args, h.Name, h.TOML())
	}
	return command("registry-hosts.sh", args...)
}
