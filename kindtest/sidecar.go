// The containers kindtest runs beside a cluster's nodes, and the reaper's
// image: one description each, and one way to get the image, start the
// container and adopt it into an attached handle.

package kindtest

import (
	"context"
	"fmt"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// sidecar describes a container that runs beside a cluster's nodes (or,
// for the reaper, beside every cluster of the engine): its role, the image
// it runs and where that image is found beside a pulled node image, its
// name, its container and what the handle records of it.
type sidecar struct {
	// option asks for it, what names it, for messages.
	option, what string
	// role is its LabelRole, by which attach tells it from the nodes.
	role string
	// image is the reference it runs from. When the engine lacks it and
	// the node image came from a registry, it is pulled from beside the
	// node image (imageref.Beside), where `kindtest build --push` puts it.
	image string
	// wanted says whether a cluster of the configuration runs it.
	wanted func(*config) bool
	// name names its container after the cluster's.
	name func(cluster string) string
	// spec is its container beyond what every sidecar has (name, image,
	// labels, the cluster's network).
	spec func(c *Cluster) docker.ContainerSpec
	// record notes on the handle what the running container says (its
	// addresses), at creation and at attach.
	record func(c *Cluster, info docker.Container) error
}

// sidecars are every container of a cluster that is not a node, in the
// order they start.
var sidecars = []sidecar{
	{
		option: "WithRegistry", what: "registry", role: RoleRegistry,
		image:  RegistryImage,
		wanted: func(cfg *config) bool { return cfg.registry },
		name:   registryName, spec: registrySpec, record: (*Cluster).setRegistryAddr,
	},
	{
		option: "WithControlPlanes", what: "load balancer", role: RoleLoadBalancer,
		image:  LoadBalancerImage,
		wanted: func(cfg *config) bool { return cfg.controlPlanes > 1 },
		name:   loadBalancerName, spec: loadBalancerSpec, record: (*Cluster).setLoadBalancer,
	},
}

// RoleServiceLoadBalancer is the role label (LabelRole) of the container
// that serves one LoadBalancer Service (see WithoutLoadBalancer).
const RoleServiceLoadBalancer = "service-load-balancer"

// serviceLBImage is the Services' load balancers' image as a sidecar:
// only ensureImage applies, before anything is created.
var serviceLBImage = sidecar{what: "LoadBalancer Services' load-balancer", image: LoadBalancerImage}

// reaperImage is the reaper's image as a sidecar: only ensureImage
// applies, the reaper's container being the engine's (see reaper.go).
var reaperImage = sidecar{what: "reaper", image: ReaperImage}

// isSidecar says whether a container of a cluster, by its role label, is
// a sidecar rather than a node.
func isSidecar(role string) bool {
	if role == RoleServiceLoadBalancer {
		return true
	}
	for _, s := range sidecars {
		if s.role == role {
			return true
		}
	}
	return false
}

// ensureImage makes sure the engine has the sidecar's image, before
// anything is created: there, or pulled from beside a node image that
// names a registry.
func (s sidecar) ensureImage(ctx context.Context, dc *docker.Client, nodeRef string, log Logger) error {
	what := s.what + " image " + s.image
	if s.option != "" {
		what = s.option + ": " + what
	}
	_, err := dc.InspectImage(ctx, s.image)
	switch {
	case err == nil:
		return nil
	case !docker.IsNotFound(err):
		return fmt.Errorf("%s: %w", what, err)
	case docker.RegistryHost(nodeRef) == "":
		return fmt.Errorf("%s is not in the engine at %s: build it with `go run github.com/kindtest/kindtest/cmd/kindtest build` (it builds the node image and the reaper, registry and load-balancer images), or load it from a file made by `kindtest image save`", what, dc.Host())
	}
	// Node images pulled from a registry have it beside them.
	ref := imageref.Beside(nodeRef, s.image)
	err = pullImage(ctx, dc, ref, log)
	if err == nil {
		err = dc.TagImage(ctx, ref, s.image)
	}
	if err != nil {
		return fmt.Errorf("%s is not in the engine at %s, and pulling it from beside the node image as %s failed: %w. `kindtest build --push NODE-REF` pushes it there; or build it with `go run github.com/kindtest/kindtest/cmd/kindtest build`", what, dc.Host(), ref, err)
	}
	return nil
}

// startSidecar creates and starts a sidecar on the cluster's network,
// labelled like the nodes (so that Delete, the reaper and the sweep
// remove it) with its role, and records what it says.
func (c *Cluster) startSidecar(ctx context.Context, s sidecar) error {
	spec := s.spec(c)
	spec.Name, spec.Image, spec.Network = s.name(c.name), s.image, c.name
	spec.Labels = c.Labels()
	spec.Labels[LabelRole] = s.role
	sctx, cancel := settled(ctx, c.cfg.createTimeout)
	defer cancel()
	id, err := c.docker.CreateContainer(sctx, spec)
	if err != nil {
		return fmt.Errorf("create %s: %w", s.what, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start %s: %w", s.what, err)
	}
	if err := c.docker.StartContainer(sctx, id); err != nil {
		return fmt.Errorf("start %s: %w", s.what, err)
	}
	info, err := c.docker.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", s.what, err)
	}
	return s.record(c, info)
}

// adoptedSidecar is a sidecar container found by attach.
type adoptedSidecar struct {
	s    sidecar
	info docker.Container
}

// adoptSidecars takes the sidecar containers out of a cluster's container
// list, for attach, inspected; attach records them once it knows the
// nodes (see record).
func (c *Cluster) adoptSidecars(ctx context.Context, cs []docker.Container) (nodes []docker.Container, found []adoptedSidecar, err error) {
	for _, ct := range cs {
		if ct.Labels[LabelRole] == RoleServiceLoadBalancer {
			continue // neither a node nor a sidecar to record
		}
		var s *sidecar
		for i := range sidecars {
			if sidecars[i].role == ct.Labels[LabelRole] {
				s = &sidecars[i]
			}
		}
		if s == nil {
			nodes = append(nodes, ct)
			continue
		}
		info, err := c.docker.InspectContainer(ctx, ct.ID)
		if err != nil {
			return nil, nil, err
		}
		found = append(found, adoptedSidecar{*s, info})
	}
	return nodes, found, nil
}

// pullImage pulls ref, logging progress every few seconds.
func pullImage(ctx context.Context, dc *docker.Client, ref string, log Logger) error {
	start := time.Now()
	log.Printf("kindtest: pulling %s", ref)
	err := dc.PullImage(ctx, ref, docker.ProgressEvery(3*time.Second, func(t docker.Transfer) {
		log.Printf("kindtest: pulling %s: %s (%s)", ref, t, time.Since(start).Round(time.Second))
	}))
	if err != nil {
		return err
	}
	log.Printf("kindtest: pulled %s in %s", ref, time.Since(start).Round(100*time.Millisecond))
	return nil
}
