package docker

import (
	"context"
	"errors"
	"sync"
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
	errs = append(errs, each(len(containers), func(i int) error {
		return c.RemoveContainer(ctx, containers[i].ID)
	}))
	volumes, err := c.ListVolumes(ctx, labels)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, each(len(volumes), func(i int) error {
		return c.RemoveVolume(ctx, volumes[i].Name)
	}))
	networks, err := c.ListNetworks(ctx, labels)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, each(len(networks), func(i int) error {
		return c.RemoveNetwork(ctx, networks[i].ID)
	}))
	return errors.Join(errs...)
}

// each runs fn for 0..n-1 at once and joins the errors.
func each(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
