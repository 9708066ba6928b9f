// The load balancer in front of several control planes
// (WithControlPlanes): its image, container and address.

package kindtest

import (
	"fmt"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// LoadBalancerImage is the image the load balancer in front of several
// control planes (WithControlPlanes) runs from. `kindtest build` builds it
// beside the node, reaper and registry images.
const LoadBalancerImage = imageref.LoadBalancer

// RoleLoadBalancer is the role label (LabelRole) of the load-balancer
// container of a cluster with several control planes.
const RoleLoadBalancer = "load-balancer"

// loadBalancerSpec is the load balancer's container (see sidecars), its
// API server port published where a single control plane's would be. Its
// backends are the control planes by name: a stopped container's name
// stops resolving, and the balancer skips it.
func loadBalancerSpec(c *Cluster) docker.ContainerSpec {
	var backends []string
	for _, n := range c.ControlPlanes() {
		backends = append(backends, fmt.Sprintf("%s:%d", n.name, apiServerPort))
	}
	return docker.ContainerSpec{
		Cmd:   []string{fmt.Sprintf("-listen=:%d", apiServerPort), "-backends=" + strings.Join(backends, ",")},
		Ports: []docker.PortBinding{{HostIP: c.place.publishIP, ContainerPort: apiServerPort}},
	}
}

// setLoadBalancer records the load balancer's addresses from its
// container.
func (c *Cluster) setLoadBalancer(info docker.Container) error {
	c.lbIP, c.lbIP6 = info.IPs[c.name], info.IPv6s[c.name]
	if c.lbIP == "" || (c.cfg.hasIPv6() && c.lbIP6 == "") {
		return fmt.Errorf("load balancer %s has no address on the cluster's network", info.Name)
	}
	c.apiServer = c.place.apiServerURL(c.name, info)
	return nil
}

// apiHost is where pods and nodes reach the API server on the cluster's
// network: the load balancer, or the only control plane, at its address
// in the cluster's first IP family (an IPv6-only cluster's pods have no
// IPv4 address).
func (c *Cluster) apiHost() string {
	if c.lbIP != "" {
		if c.cfg.family() == IPv6 {
			return c.lbIP6
		}
		return c.lbIP
	}
	return c.ControlPlane().kubeIP()
}

// lbSANs are the names the API server's certificate must carry for the
// load balancer: its name and address on the cluster's network.
func (c *Cluster) lbSANs() []string {
	if !c.ha() {
		return nil
	}
	if c.lbIP6 != "" {
		return []string{loadBalancerName(c.name), c.lbIP, c.lbIP6}
	}
	return []string{loadBalancerName(c.name), c.lbIP}
}
