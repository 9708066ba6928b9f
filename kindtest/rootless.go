// Rootless engines: what a cluster needs from the host when the engine
// runs as an unprivileged user, checked before anything is created.
//
// A rootless engine runs its containers in a user namespace. The nodes
// still start (privileged inside that namespace), and the kubelet, which
// notices the namespace, tolerates what it may not do there (the
// KubeletInUserNamespace gate, on by default since Kubernetes 1.30);
// kube-proxy is told to leave the host's conntrack sysctls alone. What
// the host must give, kind's rootless page lists: cgroup v2 with the
// cpu, memory and pids controllers delegated to the user, overlayfs in
// user namespaces, unprivileged ports for low host ports, and inotify
// instances for every node, all counted against the one user.

package kindtest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// rootlessNeeds are the controllers a rootless engine must have been
// delegated: without cpu, memory and pids the kubelet cannot make its
// pods' cgroups, and pods' limits would be silently ignored.
var rootlessNeeds = []string{"cpu", "memory", "pids"}

// delegationFix is how a systemd host delegates every controller to its
// users' managers, as kind's rootless page gives it, and how the user's
// engine (podman's service, or Docker's) then gets them.
func delegationFix(podman bool) string {
	restart := "`systemctl --user restart docker`"
	if podman {
		restart = "`systemctl --user restart podman.socket podman.service`"
	}
	return `delegate them to the user's systemd (as root):
  mkdir -p /etc/systemd/system/user@.service.d
  printf '[Service]\nDelegate=cpu cpuset io memory pids\n' >/etc/systemd/system/user@.service.d/delegate.conf
  systemctl daemon-reload
then restart the user's manager and engine (log out and in, or ` + "`systemctl restart user@$(id -u <user>)`" + `, then ` + restart + `)`
}

// rootlessHost is what checkRootless reads of the engine's host: its
// sysctls, when the engine is on this machine (nil otherwise).
type rootlessHost struct {
	sysctl func(name string) (string, error)
}

// localHost reads this machine's sysctls from /proc/sys.
func localHost() rootlessHost {
	return rootlessHost{sysctl: func(name string) (string, error) {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
		return strings.TrimSpace(string(b)), err
	}}
}

// checkRootless returns nil for a rootful engine; for a rootless one, an
// error naming every requirement the host lacks and its fix. hostPorts
// are the fixed host ports the cluster publishes (WithPortMapping).
// Limits that only matter with many nodes go to warn.
func checkRootless(e docker.EngineInfo, engine string, hostPorts []int, h rootlessHost, warn Logger) error {
	if !e.Rootless {
		return nil
	}
	var errs []error
	if e.CgroupVersion != "2" {
		errs = append(errs, fmt.Errorf("the host runs cgroup v%s: rootless nodes need cgroup v2, the only one whose controllers can be delegated to a user; boot the host with systemd.unified_cgroup_hierarchy=1 on the kernel command line (for GRUB: add it to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub and reboot)", cgroupVersion(e.CgroupVersion)))
	} else if missing := missingControllers(e.Controllers); len(missing) > 0 {
		errs = append(errs, fmt.Errorf("the engine's cgroup lacks the %s controller(s) (it has: %s): %s",
			strings.Join(missing, ", "), orNone(e.Controllers), delegationFix(e.Podman)))
	}
	if major, minor, ok := kernelRelease(e.KernelVersion); ok && (major < 5 || major == 5 && minor < 11) {
		errs = append(errs, fmt.Errorf("kernel %s: the nodes' containerd needs overlayfs mounts in a user namespace, which Linux allows from 5.11 on; run a kernel 5.11 or newer", e.KernelVersion))
	}
	if h.sysctl != nil {
		if low := lowest(hostPorts); low > 0 {
			if v, err := h.sysctl("net.ipv4.ip_unprivileged_port_start"); err == nil {
				if start, err := strconv.Atoi(v); err == nil && low < start {
					errs = append(errs, fmt.Errorf("WithPortMapping asks for host port %d, below net.ipv4.ip_unprivileged_port_start=%d, which a rootless engine cannot bind: use a port of %d or more (or 0, for one the engine picks), or allow it: `sysctl -w net.ipv4.ip_unprivileged_port_start=%d` (persist it in /etc/sysctl.d/)", low, start, start, low))
				}
			}
		}
		if v, err := h.sysctl("fs.inotify.max_user_instances"); err == nil {
			if n, err := strconv.Atoi(v); err == nil && n < 512 && warn != nil {
				warn.Printf("kindtest: rootless engine at %s: fs.inotify.max_user_instances is %d, shared by every node of every cluster (all run as one user); a few nodes exhaust it (\"too many open files\"): raise it with `sysctl -w fs.inotify.max_user_instances=512 fs.inotify.max_user_watches=524288`", engine, n)
			}
		}
	}
	if e.Driver == "vfs" && warn != nil {
		warn.Printf("kindtest: rootless engine at %s stores images with the vfs driver: every node's container is a full copy of the node image (over 1 GB), slow to create and to load; %s", engine, overlayFix(e.Podman))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rootless engine at %s cannot run nodes: %w (see https://kind.sigs.k8s.io/docs/user/rootless/)", engine, err)
	}
	return nil
}

// overlayFix says how a rootless engine gets the overlay storage driver,
// which kernels from 5.11 on allow without a helper.
func overlayFix(podman bool) string {
	if podman {
		return "give podman the overlay driver: `printf '[storage]\\ndriver = \"overlay\"\\n' > ~/.config/containers/storage.conf` as the engine's user, then `podman system reset` (it removes that user's images and containers: load the images again)"
	}
	return `give the engine the overlay2 driver: "storage-driver": "overlay2" in ~/.config/docker/daemon.json, then ` + "`systemctl --user restart docker`"
}

func missingControllers(have []string) []string {
	var missing []string
	for _, c := range rootlessNeeds {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func cgroupVersion(v string) string {
	if v == "" {
		return "1"
	}
	return v
}

// kernelRelease parses the major and minor version of a kernel release
// such as 6.1.0-28-amd64.
func kernelRelease(r string) (major, minor int, ok bool) {
	f := strings.SplitN(r, ".", 3)
	if len(f) < 2 {
		return 0, 0, false
	}
	digits := f[1]
	if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		digits = digits[:i]
	}
	major, err1 := strconv.Atoi(f[0])
	minor, err2 := strconv.Atoi(digits)
	return major, minor, err1 == nil && err2 == nil
}

func lowest(ports []int) int {
	low := 0
	for _, p := range ports {
		if p > 0 && (low == 0 || p < low) {
			low = p
		}
	}
	return low
}
