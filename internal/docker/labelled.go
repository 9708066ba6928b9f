package docker

import (
	"context"
	"errors"

	"github.com/kindtest/kindtest/internal/concurrent"
)

// RemoveLabelled removes the containers, then the volumes, then the
// networks that carry every given label, in parallel within each kind.
// Things already gone count as removed; all failures are reported together.
func (c *Client) RemoveLabelled(ctx context.Context, labels map[string]string) error {
	var errs []error
	containers, err := c.ListContainers(ctx, labels)
	if err != nil {
		return err
	}
	errs = append(errs, concurrent.Each(len(containers), func(i int) error {
		return c.RemoveContainer(ctx, containers[i].ID)
	}))
	volumes, err := c.ListVolumes(ctx, labels)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, concurrent.Each(len(volumes), func(i int) error {
		return c.RemoveVolume(ctx, volumes[i].Name)
	}))
	networks, err := c.ListNetworks(ctx, labels)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, concurrent.Each(len(networks), func(i int) error {
		return c.RemoveNetwork(ctx, networks[i].ID)
	}))
	return errors.Join(errs...)
}
