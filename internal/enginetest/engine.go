package enginetest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/poll"
)

// More engines for the engine matrix (see Release), each in a privileged
// container of the host engine, Docker-in-Docker style, with a network
// namespace of its own and no outside address. Its socket is in a host
// directory bind-mounted at the same path, so a path that the test process
// hands the inner engine (the reaper's socket bind) means the same file on
// both sides.

// LabelEngine marks the containers and volumes of test engines; the value
// is "pid@boot-id" of the test process that made them.
const LabelEngine = lifetime.LabelTestEngine

// EngineConfig says how to run a test engine.
type EngineConfig struct {
	// Release is the engine to run; the default is Docker26.
	// ContainerdStore, ListenTCP and daemon.json are Docker's: for podman
	// ContainerdStore must be false, and ListenTCP is refused.
	Release Release
	// ContainerdStore makes the engine keep images in containerd's store:
	// Docker 26 by "features": {"containerd-snapshotter": true}, Docker 29
	// by its default. Without it the engine uses the classic store
	// (graph drivers), by default or by that feature set to false.
	ContainerdStore bool
	// ListenTCP makes the engine listen on tcp://0.0.0.0:2375 of its own
	// network namespace too, which has only loopback until the caller adds
	// an interface (see Engine.NetNS).
	ListenTCP bool
	// Images are copied from the host engine into the new one.
	Images []string
	// IPv6 enables IPv6 in the engine's network namespace, as on a host
	// with IPv6. Without it the namespace has IPv6 disabled (the host
	// engine disables it for a container on no IPv6 network), as on a host
	// booted with IPv6 off.
	IPv6 bool
}

// Engine is a running test engine.
type Engine struct {
	ID string
	// Host is its unix socket, "unix:///...".
	Host string
	// Client talks to it through that socket.
	Client *docker.Client
	// Version is the engine's version, Docker's or podman's.
	Version string
	// PID is the engine container's init process on this host; its
	// network namespace is /proc/PID/ns/net.
	PID int

	host *docker.Client
}

// NetNS is the path of the engine's network namespace, for nsenter.
func (e *Engine) NetNS() string { return fmt.Sprintf("/proc/%d/ns/net", e.PID) }

// StartEngine starts a test engine on the host engine and removes it when
// the test ends. It fails the test when the engine cannot be made.
func StartEngine(t testing.TB, host *docker.Client, cfg EngineConfig) *Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	sweepEngines(ctx, t, host)
	release := cmp.Or(cfg.Release, Docker26)
	r, err := release.recipe()
	if err != nil {
		t.Fatal(err)
	}
	ref := EnsureEngineImage(t, host, release)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "kindtest-test-engine-" + hex.EncodeToString(suffix[:])
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "kt-engine-")
	if err != nil {
		t.Fatal(err)
	}
	volume := name + "-data"
	if r.podman && cfg.ListenTCP {
		t.Fatalf("test engine %s: podman's service listens on one address; ListenTCP is for Docker's releases", release)
	}
	labels := map[string]string{LabelEngine: OwnerID()}
	var id string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if id != "" {
			if err := host.RemoveContainer(ctx, id); err != nil {
				t.Errorf("remove test engine: %v", err)
			}
		}
		if err := host.RemoveVolume(ctx, volume); err != nil {
			t.Errorf("remove test engine volume: %v", err)
		}
		os.RemoveAll(dir)
	})
	if err := host.CreateVolume(ctx, volume, labels); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	features := map[string]bool{}
	maps.Copy(features, r.features)
	store := "classic"
	switch {
	case cfg.ContainerdStore && r.containerdStoreByDefault:
		store = "default"
	case cfg.ContainerdStore:
		store = "containerd"
		features["containerd-snapshotter"] = true
	default:
		features["containerd-snapshotter"] = false
	}
	daemonJSON, err := json.Marshal(map[string]any{"features": features})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"SOCK=" + sock, "DAEMON_JSON=" + string(daemonJSON)}
	if cfg.ListenTCP {
		env = append(env, "LISTEN_TCP=1")
	}
	entrypoint, data := engineEntrypoint, "/var/lib/docker"
	if r.podman {
		entrypoint, data, store = podmanEntrypoint, "/var/lib/containers", "containers/storage"
		env = env[:1]
	}
	if cfg.IPv6 {
		env = append(env, "IPV6=1")
	}
	id, err = host.CreateContainer(ctx, docker.ContainerSpec{
		Name:       name,
		Hostname:   name,
		Image:      ref,
		Labels:     labels,
		Env:        env,
		Entrypoint: []string{"/bin/sh", "-c", entrypoint, "engine"},
		Privileged: true,
		Volumes:    map[string]string{volume: data},
		Binds:      []string{dir + ":" + dir, "/lib/modules:/lib/modules:ro"},
		Tmpfs:      map[string]string{"/run": ""},
		Network:    "none",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	e := &Engine{ID: id, Host: "unix://" + sock, host: host}
	e.Client, err = waitEngine(ctx, host, id, e.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Client.Close() })
	info, err := host.InspectContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	e.PID = info.Pid
	ei, err := e.Client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.Version = ei.Version
	if e.Client.Podman() != r.podman {
		t.Fatalf("test engine %s: the client reads it as %s", release, e.Client.EngineName())
	}
	if ei.ContainerdStore != cfg.ContainerdStore {
		t.Fatalf("test engine: containerd image store is %v, want %v", ei.ContainerdStore, cfg.ContainerdStore)
	}
	if len(cfg.Images) > 0 {
		start := time.Now()
		if err := copyImages(ctx, host, e.Client, cfg.Images); err != nil {
			t.Fatalf("copy images into the test engine: %v", err)
		}
		t.Logf("test engine %s: copied %s in %v", name, strings.Join(cfg.Images, ", "), time.Since(start).Round(100*time.Millisecond))
	}
	if r.podman {
		t.Logf("test engine %s (%s): %s, %s, %s", name, release, e.Client.EngineName(), store, e.Host)
		return e
	}
	t.Logf("test engine %s (%s): Docker %s, containerd store %v (%s), daemon.json %s, %s", name, release, e.Version, ei.ContainerdStore, store, daemonJSON, e.Host)
	return e
}

// waitEngine waits until the engine answers on its socket, or its
// container has stopped.
func waitEngine(ctx context.Context, host *docker.Client, id, sock string) (*docker.Client, error) {
	deadline := time.Now().Add(90 * time.Second)
	var c *docker.Client
	err := poll.Until(ctx, 300*time.Millisecond, 300*time.Millisecond, func() (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		c, err = docker.NewHost(pctx, sock)
		cancel()
		if err == nil {
			return true, nil
		}
		info, ierr := host.InspectContainer(ctx, id)
		if ierr != nil || !info.Running || time.Now().After(deadline) {
			logs, _ := host.ContainerLogs(context.WithoutCancel(ctx), id, 30)
			return false, fmt.Errorf("test engine did not answer at %s (%v); its last output:\n%s", sock, err, logs)
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// copyImages streams `docker save` from one engine into `docker load` of
// the other.
func copyImages(ctx context.Context, from, to *docker.Client, refs []string) error {
	rc, err := from.SaveImages(ctx, refs)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = to.LoadImages(ctx, rc)
	return err
}

// OwnerID names this process: pid and boot id, so that a later run can
// tell whether the process that made an engine is gone. It is the value of
// LabelEngine.
func OwnerID() string {
	return strconv.Itoa(os.Getpid()) + "@" + bootID()
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// sweepEngines removes test engines whose test process is gone (killed
// before its cleanup ran).
func sweepEngines(ctx context.Context, t testing.TB, host *docker.Client) {
	list, err := host.ListContainers(ctx, map[string]string{LabelEngine: ""})
	if err != nil {
		t.Logf("sweep test engines: %v", err)
		return
	}
	for _, c := range list {
		if ownerAlive(c.Labels[LabelEngine]) {
			continue
		}
		_ = host.RemoveContainer(ctx, c.ID)
	}
	vols, err := host.ListVolumes(ctx, map[string]string{LabelEngine: ""})
	if err != nil {
		return
	}
	for _, v := range vols {
		if !ownerAlive(v.Labels[LabelEngine]) {
			_ = host.RemoveVolume(ctx, v.Name)
		}
	}
}

func ownerAlive(owner string) bool {
	pid, boot, ok := strings.Cut(owner, "@")
	if !ok || boot != bootID() {
		return false
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return false
	}
	_, running := lifetime.ProcessStart(n)
	return running
}

// engineEntrypoint starts dockerd in the engine container. Where the
// capability bounding set lacks CAP_SYS_RESOURCE (this project's build
// machine), --privileged containers fail to start unless a runc wrapper
// drops that capability from their spec: the same wrapper the host engine
// uses here, written out and registered as the default runtime.
const engineEntrypoint = `set -eu
if [ -n "${IPV6:-}" ]; then
  echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6
  echo 0 > /proc/sys/net/ipv6/conf/default/disable_ipv6
fi
mkdir -p /etc/docker
printf '%s\n' "$DAEMON_JSON" > /etc/docker/daemon.json
set -- -H "unix://$SOCK" -H unix:///var/run/docker.sock
if [ -n "${LISTEN_TCP:-}" ]; then
  set -- "$@" -H tcp://0.0.0.0:2375 --tls=false
fi
capbnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
if [ $(( 0x$capbnd >> 24 & 1 )) -eq 0 ]; then
  cat > /usr/local/bin/runc-drop-sys-resource <<'EOF'
#!/bin/sh
set -e
bundle=""; procfile=""; prev=""
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle="$a";; --process|-p) procfile="$a";; esac
  case "$a" in --bundle=*) bundle="${a#--bundle=}";; --process=*) procfile="${a#--process=}";; esac
  prev="$a"
done
drop='map(select(. != "CAP_SYS_RESOURCE"))'
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  jq "if .process.capabilities then .process.capabilities |= with_entries(.value |= $drop) else . end" "$bundle/config.json" > "$bundle/config.json.kt" && mv "$bundle/config.json.kt" "$bundle/config.json"
fi
if [ -n "$procfile" ] && [ -f "$procfile" ]; then
  jq "if .capabilities then .capabilities |= with_entries(.value |= $drop) else . end" "$procfile" > "$procfile.kt" && mv "$procfile.kt" "$procfile"
fi
exec runc "$@"
EOF
  chmod 0755 /usr/local/bin/runc-drop-sys-resource
  set -- "$@" --add-runtime kt-runc=/usr/local/bin/runc-drop-sys-resource --default-runtime kt-runc
fi
exec dockerd "$@"
`

// podmanEntrypoint starts podman's Docker-compatible service in the
// engine container, rootful, until the container stops. podman 5 warns at
// every command that cgroup v1 (this project's build machine) is
// deprecated. Bookworm's podman 4.3 picks CNI, whose plugins it does not
// depend on, wherever a CNI configuration is installed (its
// containers-common installs one): netavark is named, as trixie's
// defaults to. podman gives privileged containers the capabilities of its
// own bounding set, so a host without CAP_SYS_RESOURCE needs no wrapper
// here. netavark masquerades whatever leaves a network's subnet for
// another address, bridged traffic included where br_netfilter hands it
// to netfilter (this host's engine loads it): a node's packet to a pod on
// another node then leaves with the gateway's address, and a NodePort
// reached from a node whose endpoints are all elsewhere timed out. Docker
// masquerades only what leaves by another interface. So bridged traffic
// skips netfilter in the engine's namespace (see docs/engines.md).
const podmanEntrypoint = `set -eu
if [ -n "${IPV6:-}" ]; then
  echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6
  echo 0 > /proc/sys/net/ipv6/conf/default/disable_ipv6
fi
export PODMAN_IGNORE_CGROUPSV1_WARNING=1
if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
  echo 0 > /proc/sys/net/bridge/bridge-nf-call-iptables
fi
mkdir -p /etc/containers/containers.conf.d
printf '[network]\nnetwork_backend = "netavark"\n' > /etc/containers/containers.conf.d/50-kindtest.conf
exec podman system service --time=0 "unix://$SOCK"
`

// RemoteNetNS makes a network namespace of the test's own, joined to the
// engine's by a veth pair with private addresses (10.251.N.1 on the test's
// side, 10.251.N.2 on the engine's), and removes it when the test ends. A
// process run in it (nsenter --net=PATH) reaches the engine only over that
// link, as a remote engine: start the engine with ListenTCP and use
// DOCKER_HOST=tcp://ENGINEIP:2375. No address outside the two namespaces
// is involved.
func (e *Engine) RemoteNetNS(t testing.TB) (path, engineIP string) {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:4])
	ns := "kt-remote-" + tag
	local, peer := "ktv"+tag+"a", "ktv"+tag+"b"
	subnet := fmt.Sprintf("10.251.%d", b[4])
	engineIP = subnet + ".2"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() {
		// Deleting the namespace deletes the veth pair with it.
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	run("ip", "link", "add", local, "type", "veth", "peer", "name", peer)
	run("ip", "link", "set", local, "netns", ns)
	run("ip", "link", "set", peer, "netns", strconv.Itoa(e.PID))
	run("ip", "-n", ns, "link", "set", "lo", "up")
	run("ip", "-n", ns, "addr", "add", subnet+".1/30", "dev", local)
	run("ip", "-n", ns, "link", "set", local, "up")
	inEngine := []string{"nsenter", "--net=" + e.NetNS(), "--", "ip"}
	run(append(inEngine, "addr", "add", engineIP+"/30", "dev", peer)...)
	run(append(inEngine, "link", "set", peer, "up")...)
	return "/run/netns/" + ns, engineIP
}

// Exec runs a command in the engine's container (iptables, ip) and returns
// its exit code.
func (e *Engine) Exec(ctx context.Context, cmd ...string) (int, error) {
	return e.host.Exec(ctx, e.ID, cmd, docker.ExecOptions{})
}
