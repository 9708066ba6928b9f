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
// Chain is one command that runs cmds, each a command as this package
// makes them, one after the other in one shell, and stops at the first
// that fails, saying which: one exec instead of several, each of which
// costs the engine about a tenth of a second of CPU. The commands' words
// reach the shell as its arguments, never as script text.
func Chain(cmds ...[]string) []string {
	if len(cmds) == 1 {
		return cmds[0]
	}
	var script strings.Builder
	var args []string
	for _, cmd := range cmds {
		refs := make([]string, len(cmd))
		for i, word := range cmd {
			args = append(args, word)
			refs[i] = fmt.Sprintf(`"${%d}"`, len(args))
		}
		name := cmd[0]
		if len(cmd) > 3 && cmd[1] == "-c" {
			name = cmd[3] // the script's name, as command passes it
		}
		args = append(args, name)
		fmt.Fprintf(&script, "%s || { s=$?; echo \"${%d} failed (exit $s)\" >&2; exit $s; }\n", strings.Join(refs, " "), len(args))
	}
	return append([]string{"sh", "-c", script.String(), "chain"}, args...)
}

// ProvisionCommand prepares a node before systemd boots it (see
// provision.sh); a restarted node passes the machine id it had. Its
// output may say the OOM score the kubelet must keep (see
// KubeletOOMScoreAdj).
func ProvisionCommand(machineID string) []string {
	if machineID == "" {
		return command("provision.sh")
	}
	return command("provision.sh", machineID)
}

// KubeletOOMScoreAdj reads ProvisionCommand's output: the OOM score the
// kubelet must keep, because the node cannot lower it, and whether the
// output said so.
func KubeletOOMScoreAdj(out string) (int, bool) {
	for line := range strings.Lines(out) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "kindtest: kubelet oom-score-adj ")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			return n, true
		}
	}
	return 0, false
}

// ProxyEnvCommand makes the proxy settings the default environment of
// every systemd unit of the node, before it boots: HTTP_PROXY and
// HTTPS_PROXY ("" for none) and NO_PROXY, to which the node network's
// subnet is added.
func ProxyEnvCommand(httpProxy, httpsProxy, noProxy string) []string {
	return command("proxy-env.sh", httpProxy, httpsProxy, noProxy)
}

// NodeNetwork is a node's networking, set up before it boots.
type NodeNetwork struct {
	// PodSubnets are the node's own pod ranges, one per IP family, on a
	// bridge of kindtest's CNI configuration; none leaves the pod network
	// to the test's CNI plugin: no CNI configuration, masquerading or
	// routes.
	PodSubnets []string
	// ClusterPodSubnets are every node's pod ranges together, one per
	// family as PodSubnets: traffic from the node's pods leaving them is
	// masqueraded.
	ClusterPodSubnets []string
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
	if len(n.PodSubnets) == 0 {
		return command("node-network.sh")
	}
	filter := "off"
	if n.BridgeNetfilter {
		filter = "on"
	}
	args := []string{string(CNIConfig(n.PodSubnets...)), filter}
	for i, p := range n.PodSubnets {
		args = append(args, "masquerade", p, n.ClusterPodSubnets[i])
	}
	for _, r := range n.Routes {
		args = append(args, "route", r.Dst, r.Via)
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

// Preboot is what kubeadm-preboot.sh does on the first control plane
// before it boots, in one exec: write Files, run the kubeadm init phases
// that only write files with the configuration at Config (logged to Log),
// hold the scheduler's manifest back, and print the manifests of Addons,
// with the configuration at AddonConfig (the same without patches: see
// InitConfig.PatchesDir), and the files of Print (see Parse).
type Preboot struct {
	Config, AddonConfig, Log string
	Files                    []File
	Addons                   []string
	Print                    []string
}

// File is a file a script writes: its path and content.
type File struct{ Path, Content string }

// Command is the command to run with Input as its standard input.
func (p Preboot) Command() []string {
	args := append([]string{p.Config, p.AddonConfig, p.Log, SchedulerManifest, HeldSchedulerManifest}, fileArgs(p.Files)...)
	args = append(append(args, "--"), p.Addons...)
	args = append(append(args, "--"), p.Print...)
	args = append(append(args, "--"), prebootPhases...)
	return command("kubeadm-preboot.sh", args...)
}

// Input is the standard input of Command: the files' contents, one after
// the other.
func (p Preboot) Input() string { return filesInput(p.Files) }

// fileArgs are the arguments that tell a script which files to write
// from its standard input: each path and its size.
func fileArgs(files []File) []string {
	var args []string
	for _, f := range files {
		args = append(args, f.Path, strconv.Itoa(len(f.Content)))
	}
	return args
}

// filesInput is the standard input that goes with fileArgs.
func filesInput(files []File) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f.Content)
	}
	return b.String()
}

// KubeadmJoin is what kubeadm-join.sh does on a joining node, in one
// exec: write Files (kubeadm's configuration among them), then run
// kubeadm join with the configuration at Config, its output kept at Log.
type KubeadmJoin struct {
	Config, Log string
	Files       []File
}

// Command is the command to run with Input as its standard input.
func (j KubeadmJoin) Command() []string {
	return command("kubeadm-join.sh", append([]string{j.Config, j.Log}, fileArgs(j.Files)...)...)
}

// Input is the standard input of Command: the files' contents.
func (j KubeadmJoin) Input() string { return filesInput(j.Files) }

// prebootMarker starts each part of kubeadm-preboot.sh's output, after an
// empty line.
const prebootMarker = "\n--- kindtest:"

// ParsePreboot splits what Command printed into its parts, by add-on name
// and file path, and checks that every add-on and file of p is there.
func (p Preboot) Parse(out string) (map[string]string, error) {
	parts := map[string]string{}
	chunks := strings.Split(out, prebootMarker)
	if strings.TrimSpace(chunks[0]) != "" {
		return nil, fmt.Errorf("kubeadm-preboot.sh printed %q before its first part", chunks[0])
	}
	for _, c := range chunks[1:] {
		name, content, _ := strings.Cut(c, "\n")
		parts[name] = content
	}
	for _, name := range append(append([]string(nil), p.Addons...), p.Print...) {
		if _, ok := parts[name]; !ok {
			return nil, fmt.Errorf("kubeadm-preboot.sh printed no %s", name)
		}
	}
	return parts, nil
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

// WaitSystemdCommand waits in the node until systemd has booted it (see
// wait-systemd.sh).
func WaitSystemdCommand() []string { return command("wait-systemd.sh") }

// WaitJobCommand waits, with the admin's kubeconfig, until the Job object
// in namespace is Complete (exit 0) or Failed (exit 3), for at most
// timeout (kubectl's --timeout, e.g. 30s).
func WaitJobCommand(kubeconfig, object, namespace, timeout string) []string {
	return command("wait-job.sh", kubeconfig, object, namespace, timeout)
}

// ImageLabel is a label put on an image in a node's containerd.
type ImageLabel struct {
	// From is the containerd name the archive gives the image where it
	// is not Ref (podman's localhost/x:1), "" where it is: the image is
	// named Ref as well before it is labelled.
	From string
	// Ref is the image's containerd name (docker.io/library/x:1).
	Ref string
	// Label is key=value.
	Label string
}

// ImportImagesCommand imports the image archive on its stdin into the
// node's containerd, only platform's content, then names the images the
// archive named otherwise and puts labels on them; an image that cannot
// be labelled is imported again next time.
func ImportImagesCommand(platform string, labels []ImageLabel) []string {
	args := []string{platform}
	for _, l := range labels {
		args = append(args, l.From, l.Ref, l.Label)
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
