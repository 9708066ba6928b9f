// The cluster's container registry (WithRegistry) and containerd's
// registry hosts on every node (WithRegistryMirror).

package kindtest

import (
	"context"
	"fmt"
	"net"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/docker"
)

// RegistryImage is the image a cluster's registry (WithRegistry) runs
// from. `kindtest build` builds it beside the node and reaper images.
const RegistryImage = images.RegistryImage

// RoleRegistry is the role label (LabelRole) of a cluster's registry
// container.
const RoleRegistry = "registry"

// RegistryEndpoint is where nodes reach the cluster's registry
// (WithRegistry) on the cluster's network, for WithRegistryMirror: with
// WithRegistryMirror("docker.io", kindtest.RegistryEndpoint), images pushed
// to RegistryAddr() as localhost:PORT/library/busybox:1.36 are what pods
// naming docker.io/library/busybox:1.36 get.
const RegistryEndpoint = "http://" + registryAlias + ":5000"

// registryHostsDir is where containerd on a node reads per-registry host
// configuration (config_path in the node image's containerd.toml).
const registryHostsDir = "/etc/containerd/certs.d"

// checkRegistryImage makes sure the registry image is there before
// anything is created.
func checkRegistryImage(ctx context.Context, dc *docker.Client, cfg *config) error {
	if !cfg.registry {
		return nil
	}
	_, err := dc.InspectImage(ctx, RegistryImage)
	if docker.IsNotFound(err) && docker.RegistryHost(cfg.image) != "" {
		// Node images pulled from a registry have it beside them.
		ref := images.RegistryRef(cfg.image)
		if err = pullImage(ctx, dc, ref, cfg.logger); err == nil {
			err = dc.TagImage(ctx, ref, RegistryImage)
		}
		if err != nil {
			return fmt.Errorf("kindtest: WithRegistry: registry image %s is not in the engine at %s, and pulling it from beside the node image as %s failed: %w. `kindtest build --push NODE-REF` pushes it there; or build it with `go run github.com/kindtest/kindtest/cmd/kindtest build`", RegistryImage, dc.Host(), ref, err)
		}
		return nil
	}
	if docker.IsNotFound(err) {
		return fmt.Errorf("kindtest: WithRegistry: registry image %s is not in the engine at %s: build it with `go run github.com/kindtest/kindtest/cmd/kindtest build` (it builds the node, reaper and registry images), or load it from a file made by `kindtest image save`", RegistryImage, dc.Host())
	}
	if err != nil {
		return fmt.Errorf("kindtest: WithRegistry: %w", err)
	}
	return nil
}

// startRegistry creates and starts the cluster's registry container, on
// the cluster's network, labelled like the nodes (so that Delete, the
// reaper and the sweep remove it), its port published on the engine
// host's loopback, or for a remote engine on every address of that host:
// the engine itself pushes to localhost:PORT.
func (c *Cluster) startRegistry(ctx context.Context) error {
	if !c.cfg.registry {
		return nil
	}
	name := registryName(c.name)
	labels := c.Labels()
	labels[LabelRole] = RoleRegistry
	hostIP := c.place.publishIP
	if c.place.kind == placementRemote {
		hostIP = "0.0.0.0"
	}
	sctx, cancel := settled(ctx, c.cfg.createTimeout)
	defer cancel()
	id, err := c.docker.CreateContainer(sctx, docker.ContainerSpec{
		Name:    name,
		Image:   RegistryImage,
		Labels:  labels,
		Network: c.name,
		Aliases: []string{registryAlias},
		Ports:   []docker.PortBinding{{HostIP: hostIP, ContainerPort: images.RegistryPort}},
	})
	if err != nil {
		return fmt.Errorf("cluster %s: create registry: %w", c.name, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster %s: start registry: %w", c.name, err)
	}
	if err := c.docker.StartContainer(sctx, id); err != nil {
		return fmt.Errorf("cluster %s: start registry: %w", c.name, err)
	}
	info, err := c.docker.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("cluster %s: registry: %w", c.name, err)
	}
	return c.setRegistryAddr(info)
}

// setRegistryAddr records the registry's published port from its
// container.
func (c *Cluster) setRegistryAddr(info docker.Container) error {
	hostPort := info.Ports[fmt.Sprintf("%d/tcp", images.RegistryPort)]
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("cluster %s: registry container %s: port %d is not published (%q)", c.name, info.Name, images.RegistryPort, hostPort)
	}
	c.registryAddr = "localhost:" + port
	return nil
}

// RegistryAddr returns the name of the cluster's registry (WithRegistry),
// "localhost:PORT", or "" when it has none. The same name works in image
// references pushed through the engine (`docker tag IMG
// localhost:PORT/name:tag && docker push localhost:PORT/name:tag`, which
// the engine treats as a local, plain-HTTP registry) and in pod specs: on
// every node containerd maps it to the registry container.
func (c *Cluster) RegistryAddr() string { return c.registryAddr }

// registryHostsCommand is what provisionNode runs on node n before boot,
// nil when there is nothing to write: containerd's host configuration,
// the cluster registry's name mapped to its container, and the mirrors.
// The control plane then waits until the registry answers over the
// cluster's network.
func (c *Cluster) registryHostsCommand(n *Node) []string {
	var hosts []bootstrap.RegistryHosts
	index := map[string]int{}
	host := func(name string) *bootstrap.RegistryHosts {
		if _, ok := index[name]; !ok {
			index[name] = len(hosts)
			hosts = append(hosts, bootstrap.RegistryHosts{Name: name})
		}
		return &hosts[index[name]]
	}
	endpoint := fmt.Sprintf("http://%s:%d", registryName(c.name), images.RegistryPort)
	if c.registryAddr != "" {
		host(c.registryAddr).Server = endpoint
	}
	for _, m := range c.cfg.mirrors {
		// Hosts are tried in the order the file lists them.
		h := host(m.host)
		h.Mirrors = append(h.Mirrors, m.endpoint)
	}
	if len(hosts) == 0 {
		return nil
	}
	var waitName, waitURL string
	if c.registryAddr != "" && n.role == RoleControlPlane {
		waitName, waitURL = registryName(c.name), endpoint+"/v2/"
	}
	return bootstrap.RegistryHostsCommand(registryHostsDir, waitName, waitURL, hosts)
}

// adoptRegistry takes the registry container out of a cluster's container
// list, for Attach, recording its address.
func (c *Cluster) adoptRegistry(ctx context.Context, cs []docker.Container) ([]docker.Container, error) {
	out := cs[:0:0]
	for _, ct := range cs {
		if ct.Labels[LabelRole] != RoleRegistry {
			out = append(out, ct)
			continue
		}
		info, err := c.docker.InspectContainer(ctx, ct.ID)
		if err != nil {
			return nil, err
		}
		if err := c.setRegistryAddr(info); err != nil {
			return nil, err
		}
	}
	return out, nil
}
