// The load balancer in front of several control planes
// (WithControlPlanes): its image, container and address.

package kindtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
)

// LoadBalancerImage is the image the load balancer in front of several
// control planes (WithControlPlanes) runs from. `kindtest build` builds it
// beside the node, reaper and registry images.
const LoadBalancerImage = images.LoadBalancerImage

// RoleLoadBalancer is the role label (LabelRole) of the load-balancer
// container of a cluster with several control planes.
const RoleLoadBalancer = "load-balancer"

// checkLoadBalancerImage makes sure the load-balancer image is there
// before anything is created.
func checkLoadBalancerImage(ctx context.Context, dc *docker.Client, cfg *config) error {
	if cfg.controlPlanes <= 1 {
		return nil
	}
	_, err := dc.InspectImage(ctx, LoadBalancerImage)
	if docker.IsNotFound(err) && docker.RegistryHost(cfg.image) != "" {
		ref := images.LoadBalancerRef(cfg.image)
		if err = pullImage(ctx, dc, ref, cfg.logger); err == nil {
			err = dc.TagImage(ctx, ref, LoadBalancerImage)
		}
		if err != nil {
			return fmt.Errorf("kindtest: WithControlPlanes: load-balancer image %s is not in the engine at %s, and pulling it from beside the node image as %s failed: %w. `kindtest build --push NODE-REF` pushes it there", LoadBalancerImage, dc.Host(), ref, err)
		}
		return nil
	}
	if docker.IsNotFound(err) {
		return fmt.Errorf("kindtest: WithControlPlanes: load-balancer image %s is not in the engine at %s: build it with `go run github.com/kindtest/kindtest/cmd/kindtest build` (it builds the node, reaper, registry and load-balancer images), or load it from a file made by `kindtest image save`", LoadBalancerImage, dc.Host())
	}
	if err != nil {
		return fmt.Errorf("kindtest: WithControlPlanes: %w", err)
	}
	return nil
}

// startLoadBalancer creates and starts the load balancer in front of the
// control planes, on the cluster's network, labelled like the nodes (so
// that Delete, the reaper and the sweep remove it), its API server port
// published where a single control plane's would be. Its backends are the
// control planes by name: a stopped container's name stops resolving, and
// the balancer skips it.
func (c *Cluster) startLoadBalancer(ctx context.Context) error {
	if !c.ha() {
		return nil
	}
	var backends []string
	for _, n := range c.ControlPlanes() {
		backends = append(backends, fmt.Sprintf("%s:%d", n.name, apiServerPort))
	}
	labels := c.Labels()
	labels[LabelRole] = RoleLoadBalancer
	sctx, cancel := settled(ctx, c.cfg.createTimeout)
	defer cancel()
	id, err := c.docker.CreateContainer(sctx, docker.ContainerSpec{
		Name:    loadBalancerName(c.name),
		Image:   LoadBalancerImage,
		Cmd:     []string{fmt.Sprintf("-listen=:%d", apiServerPort), "-backends=" + strings.Join(backends, ",")},
		Labels:  labels,
		Network: c.name,
		Ports:   []docker.PortBinding{{HostIP: c.place.publishIP, ContainerPort: apiServerPort}},
	})
	if err != nil {
		return fmt.Errorf("cluster %s: create load balancer: %w", c.name, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster %s: start load balancer: %w", c.name, err)
	}
	if err := c.docker.StartContainer(sctx, id); err != nil {
		return fmt.Errorf("cluster %s: start load balancer: %w", c.name, err)
	}
	info, err := c.docker.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("cluster %s: load balancer: %w", c.name, err)
	}
	return c.setLoadBalancer(info)
}

// setLoadBalancer records the load balancer's addresses from its
// container.
func (c *Cluster) setLoadBalancer(info docker.Container) error {
	c.lbIP = info.IPs[c.name]
	if c.lbIP == "" {
		return fmt.Errorf("cluster %s: load balancer %s has no address on the cluster's network", c.name, info.Name)
	}
	c.apiServer = c.place.apiServerURL(c.name, info)
	return nil
}

// apiHost is where pods and nodes reach the API server on the cluster's
// network: the load balancer, or the only control plane.
func (c *Cluster) apiHost() string {
	if c.lbIP != "" {
		return c.lbIP
	}
	return c.ControlPlane().ip
}

// lbSANs are the names the API server's certificate must carry for the
// load balancer: its name and address on the cluster's network.
func (c *Cluster) lbSANs() []string {
	if !c.ha() {
		return nil
	}
	return []string{loadBalancerName(c.name), c.lbIP}
}

// adoptLoadBalancer takes the load-balancer container out of a cluster's
// container list, for Attach, recording its address.
func (c *Cluster) adoptLoadBalancer(ctx context.Context, cs []docker.Container) ([]docker.Container, *docker.Container, error) {
	out := cs[:0:0]
	var lb *docker.Container
	for _, ct := range cs {
		if ct.Labels[LabelRole] != RoleLoadBalancer {
			out = append(out, ct)
			continue
		}
		info, err := c.docker.InspectContainer(ctx, ct.ID)
		if err != nil {
			return nil, nil, err
		}
		lb = &info
	}
	return out, lb, nil
}
