package kindtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// placement is where this process stands relative to the engine. It
// decides the address a published port (the API server's, the reaper's) is
// bound on, and the address this process dials to reach the API server.
type placement struct {
	kind placementKind
	// publishIP is the engine host's address ports are published on:
	// 127.0.0.1 unless the engine is remote.
	publishIP string
	// self is this process's own container on the engine, for
	// placementContainer.
	self docker.Container
	// socket is, for placementContainer, the engine's socket as a path on
	// the engine's host (what the container has mounted).
	socket string
}

type placementKind int

const (
	// placementLocal: the engine runs on this host (or shares this
	// process's network namespace); published ports are on 127.0.0.1.
	placementLocal placementKind = iota
	// placementRemote: the engine is reached over TCP at another address;
	// ports are published on that address.
	placementRemote
	// placementContainer: this process runs in a container of the engine
	// itself; it joins each cluster's network and dials the nodes there.
	placementContainer
)

func (p placement) String() string {
	switch p.kind {
	case placementRemote:
		return "remote engine at " + p.publishIP
	case placementContainer:
		return "in container " + p.self.Name + " of the engine"
	}
	return "local engine"
}

// detectPlacement works out where this process stands relative to the
// engine dc talks to: a tcp:// engine at a non-loopback address is remote;
// a process whose own container the engine knows runs inside it; anything
// else is local.
func detectPlacement(ctx context.Context, dc *docker.Client) (placement, error) {
	local := placement{kind: placementLocal, publishIP: "127.0.0.1"}
	if ip, remote, err := remoteAddress(dc.Host()); err != nil {
		return placement{}, err
	} else if remote {
		return placement{kind: placementRemote, publishIP: ip}, nil
	}
	id := selfContainerID()
	if id == "" {
		return local, nil
	}
	self, err := dc.InspectContainer(ctx, id)
	if docker.IsNotFound(err) {
		// A container of another engine, for example next to a Docker-in-
		// Docker sidecar in the same pod: it shares the engine's
		// network namespace or it could not reach the engine's socket.
		return local, nil
	}
	if err != nil {
		return placement{}, fmt.Errorf("this process runs in container %.12s: %w", id, err)
	}
	switch {
	case self.NetworkMode == "host":
		return local, nil
	case strings.HasPrefix(self.NetworkMode, "container:"), self.NetworkMode == "none":
		return placement{}, fmt.Errorf("this process runs in container %s of the engine, whose network mode %q cannot join a cluster's network: run it on a bridge network (the default) or with --network host", self.Name, self.NetworkMode)
	}
	p := placement{kind: placementContainer, publishIP: "127.0.0.1", self: self}
	for _, m := range self.Mounts {
		if m.Destination == strings.TrimPrefix(dc.Host(), "unix://") {
			p.socket = m.Source
		}
	}
	return p, nil
}

// remoteAddress reads an engine address: for tcp:// (or http(s)://) at a
// non-loopback host it returns that host's IP and true.
func remoteAddress(host string) (string, bool, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", false, fmt.Errorf("engine address %q: %w", host, err)
	}
	switch u.Scheme {
	case "tcp", "http", "https":
	default:
		return "", false, nil
	}
	name := u.Hostname()
	ip := net.ParseIP(name)
	if ip == nil {
		ips, err := net.LookupIP(name)
		if err != nil || len(ips) == 0 {
			return "", false, fmt.Errorf("engine address %s: resolve %s: %v", host, name, err)
		}
		ip = ips[0]
		for _, cand := range ips {
			if cand.To4() != nil {
				ip = cand
				break
			}
		}
	}
	if ip.IsLoopback() {
		return "", false, nil
	}
	return ip.String(), true, nil
}

// containerIDPattern finds a container's id in the source of the files
// the engine bind-mounts into it (/etc/hostname, /etc/hosts,
// /etc/resolv.conf live in .../containers/<id>/).
var containerIDPattern = regexp.MustCompile(`/containers/([0-9a-f]{64})/`)

// selfContainerID is the id of the container this process runs in, or ""
// outside a container. It reads /proc/self/mountinfo, which works on
// cgroup v1 and v2 hosts alike (with cgroup namespaces /proc/self/cgroup
// says nothing).
func selfContainerID() string {
	if _, err := os.Stat("/.dockerenv"); err != nil {
		return ""
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	return containerIDFromMountinfo(f)
}

func containerIDFromMountinfo(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// The mount point is field 5; the root within the source, field 4.
		if len(fields) < 5 {
			continue
		}
		switch fields[4] {
		case "/etc/hostname", "/etc/hosts", "/etc/resolv.conf":
			if m := containerIDPattern.FindStringSubmatch(fields[3]); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// apiServerURL is the address this process dials to reach the API server
// of the control-plane container cp (as inspected after start): its
// published port, or, from inside a container of the engine, its address
// on the cluster's network.
func (p placement) apiServerURL(cluster string, cp docker.Container) string {
	if p.kind == placementContainer {
		return fmt.Sprintf("https://%s", net.JoinHostPort(cp.IPs[cluster], fmt.Sprint(apiServerPort)))
	}
	return "https://" + cp.Ports[fmt.Sprintf("%d/tcp", apiServerPort)]
}

// joinNetwork connects this process's own container to the cluster's
// network, so that it reaches the nodes by their addresses there, as
// kind's internal kubeconfig does.
func (p placement) joinNetwork(ctx context.Context, dc *docker.Client, network string) error {
	if p.kind != placementContainer {
		return nil
	}
	if err := dc.ConnectNetwork(ctx, network, p.self.ID); err != nil {
		if self, ierr := dc.InspectContainer(ctx, p.self.ID); ierr == nil && self.IPs[network] != "" {
			return nil // joined already, by an earlier Attach
		}
		return fmt.Errorf("this process runs in container %s of the engine and must join the cluster's network %s to reach its API server, which failed: %w", p.self.Name, network, err)
	}
	return nil
}

// certSANs are the addresses, besides the node's own, that the API
// server's certificate must name for this process to dial it.
func (p placement) certSANs() []string {
	if p.kind == placementRemote {
		return []string{p.publishIP}
	}
	return nil
}

// reaperSite is where this process's reaper runs and how it is reached.
type reaperSite struct {
	place placement
	// name of the reaper container. Processes reaching a remote engine
	// share one of their own, published on the engine's address; the
	// engine's local one is published on its loopback only.
	name string
	// socket is the engine's socket as a path on the engine's host, which
	// the reaper mounts.
	socket string
}

func newReaperSite(ctx context.Context, dc *docker.Client) (reaperSite, error) {
	p, err := detectPlacement(ctx, dc)
	if err != nil {
		return reaperSite{}, err
	}
	site := reaperSite{place: p, name: reaperName, socket: defaultEngineSocket}
	switch p.kind {
	case placementLocal:
		// Not always the path dialled: see MountableSocket (Docker
		// Desktop, colima).
		site.socket = dc.MountableSocket(ctx)
	case placementContainer:
		if p.socket != "" {
			site.socket = p.socket
		}
	case placementRemote:
		site.name = reaperName + "-" + strings.NewReplacer(".", "-", ":", "-").Replace(p.publishIP)
	}
	return site, nil
}

// defaultEngineSocket is where an engine's socket is on its own host
// unless this process knows better: for a remote engine it cannot know.
const defaultEngineSocket = "/var/run/docker.sock"

// reaperAddress is where this process dials the reaper container id: its
// published port, or from inside a container of the engine, its address
// on this container's network (the reaper joins it if need be).
func (p placement) reaperAddress(ctx context.Context, dc *docker.Client, id string) (string, error) {
	info, err := dc.InspectContainer(ctx, id)
	if err != nil {
		return "", err
	}
	if p.kind != placementContainer {
		addr := info.Ports[fmt.Sprintf("%d/tcp", reaperPort)]
		if addr == "" {
			return "", fmt.Errorf("reaper container %s: port %d is not published", info.Name, reaperPort)
		}
		return addr, nil
	}
	network := p.network()
	if info.IPs[network] == "" {
		if err := dc.ConnectNetwork(ctx, network, id); err != nil {
			return "", fmt.Errorf("reaper container %s: join this process's network %s: %w", info.Name, network, err)
		}
		if info, err = dc.InspectContainer(ctx, id); err != nil {
			return "", err
		}
	}
	if info.IPs[network] == "" {
		return "", fmt.Errorf("reaper container %s has no address on network %s", info.Name, network)
	}
	return net.JoinHostPort(info.IPs[network], fmt.Sprint(reaperPort)), nil
}

// network is the network of this process's container that others join
// to be reached from it.
func (p placement) network() string {
	mode := p.self.NetworkMode
	if mode == "default" || mode == "" {
		mode = "bridge"
	}
	if _, ok := p.self.IPs[mode]; ok {
		return mode
	}
	for name := range p.self.IPs {
		return name
	}
	return mode
}
