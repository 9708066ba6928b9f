// The node ports WithPortMapping publishes on the host.

package kindtest

import (
	"fmt"
	"net"
	"strconv"

	"github.com/kindtest/kindtest/internal/docker"
)

// portBindings publishes the configured node ports of the control plane.
func (c *Cluster) portBindings() []docker.PortBinding {
	var out []docker.PortBinding
	for _, m := range c.cfg.portMappings {
		b := docker.PortBinding{HostIP: c.place.publishIP, ContainerPort: m.nodePort}
		if m.hostPort != 0 {
			b.HostPort = strconv.Itoa(m.hostPort)
		}
		out = append(out, b)
	}
	return out
}

// hostPorts are the fixed host ports WithPortMapping asks for.
func (c *config) hostPorts() []int {
	var out []int
	for _, m := range c.portMappings {
		if m.hostPort != 0 {
			out = append(out, m.hostPort)
		}
	}
	return out
}

// MappedAddr returns the host:port at which this process reaches nodePort
// of the control-plane node, published with WithPortMapping: the
// published port on the engine's host, or, from inside a container of the
// engine, the node's own address on the cluster network (as for the API
// server). A port that was not mapped is an error.
func (c *Cluster) MappedAddr(nodePort int) (string, error) {
	addr := c.ports[fmt.Sprintf("%d/tcp", nodePort)]
	if addr == "" || nodePort == apiServerPort {
		return "", fmt.Errorf("kindtest: cluster %s: node port %d is not mapped: create the cluster WithPortMapping(0, %d)", c.name, nodePort, nodePort)
	}
	if c.place.kind == placementContainer {
		return net.JoinHostPort(c.ControlPlane().kubeIP(), strconv.Itoa(nodePort)), nil
	}
	return addr, nil
}
