// The cluster's container registry (WithRegistry) and containerd's
// registry hosts on every node (WithRegistryMirror).

package kindtest

import (
	"fmt"
	"net"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// RegistryImage is the image a cluster's registry (WithRegistry) runs
// from. `kindtest build` builds it beside the node and reaper images.
const RegistryImage = imageref.Registry

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

// registrySpec is the registry's container (see sidecars): reached by
// the nodes as registryAlias on the cluster's network, its port published
// on the engine host's loopback, or for a remote engine on every address
// of that host: the engine itself pushes to localhost:PORT.
func registrySpec(c *Cluster) docker.ContainerSpec {
	hostIP := c.place.publishIP
	if c.place.kind == placementRemote {
		hostIP = "0.0.0.0"
	}
	return docker.ContainerSpec{
		Aliases: []string{registryAlias},
		Ports:   []docker.PortBinding{{HostIP: hostIP, ContainerPort: imageref.RegistryPort}},
	}
}

// setRegistryAddr records the registry's published port from its
// container.
func (c *Cluster) setRegistryAddr(info docker.Container) error {
	hostPort := info.Ports[fmt.Sprintf("%d/tcp", imageref.RegistryPort)]
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("registry container %s: port %d is not published (%q)", info.Name, imageref.RegistryPort, hostPort)
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
	endpoint := fmt.Sprintf("http://%s:%d", registryName(c.name), imageref.RegistryPort)
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
