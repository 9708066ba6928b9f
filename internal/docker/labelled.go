package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/kindtest/kindtest/internal/concurrent"
)

// RemoveLabelled removes the containers, then the volumes, then the
// networks that carry every given label, in parallel within each kind, and
// returns once none is left. Things already gone count as removed. A
// removal that conflicts with another one in progress (another handle or
// process deleting the same cluster: "removal already in progress", a
// volume still in use, a network with endpoints) is waited for and
// retried until ctx ends. Other failures are reported together.
//
// Every label must have a value: a key-only selector would match every
// resource carrying the key, every cluster on the engine.
func (c *Client) RemoveLabelled(ctx context.Context, labels map[string]string) error {
	if err := checkSelector(labels); err != nil {
		return err
	}
	delay := 50 * time.Millisecond
	for {
		n, err := c.removeRound(ctx, labels)
		if n == 0 && err == nil {
			return nil
		}
		if err != nil && !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d object(s) still there", n)
			}
			return fmt.Errorf("remove objects labelled %s: %w (%w)", selectorString(labels), ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// removeRound lists and removes what carries the labels once, returning how
// many objects it found.
func (c *Client) removeRound(ctx context.Context, labels map[string]string) (int, error) {
	containers, err := c.ListContainers(ctx, labels)
	if err != nil {
		return 0, err
	}
	errs := []error{concurrent.Each(len(containers), func(i int) error {
		return c.RemoveContainer(ctx, containers[i].ID)
	})}
	volumes, err := c.ListVolumes(ctx, labels)
	if err != nil {
		return 0, errors.Join(append(errs, err)...)
	}
	errs = append(errs, concurrent.Each(len(volumes), func(i int) error {
		return c.RemoveVolume(ctx, volumes[i].Name)
	}))
	networks, err := c.ListNetworks(ctx, labels)
	if err != nil {
		return 0, errors.Join(append(errs, err)...)
	}
	errs = append(errs, concurrent.Each(len(networks), func(i int) error {
		return c.RemoveNetwork(ctx, networks[i].ID)
	}))
	return len(containers) + len(volumes) + len(networks), errors.Join(errs...)
}

// retryable reports whether every failure in err is one that another
// removal in progress explains.
func retryable(err error) bool {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			if e != nil && !retryable(e) {
				return false
			}
		}
		return true
	}
	// The engine answers 409 to a removal already in progress and to a
	// volume in use, and 403 to a network that still has endpoints.
	return cerrdefs.IsConflict(err) || cerrdefs.IsPermissionDenied(err) || cerrdefs.IsNotFound(err)
}

// LabelValues returns the distinct values that the containers, volumes and
// networks carrying every given label have for key, sorted.
func (c *Client) LabelValues(ctx context.Context, labels map[string]string, key string) ([]string, error) {
	seen := map[string]bool{}
	cs, err := c.ListContainers(ctx, labels)
	if err != nil {
		return nil, err
	}
	for _, x := range cs {
		seen[x.Labels[key]] = true
	}
	vs, err := c.ListVolumes(ctx, labels)
	if err != nil {
		return nil, err
	}
	for _, x := range vs {
		seen[x.Labels[key]] = true
	}
	ns, err := c.ListNetworks(ctx, labels)
	if err != nil {
		return nil, err
	}
	for _, x := range ns {
		seen[x.Labels[key]] = true
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out, nil
}

// checkSelector refuses a selector that could match more than intended.
func checkSelector(labels map[string]string) error {
	if len(labels) == 0 {
		return errors.New("remove labelled objects: no labels given: that would select everything")
	}
	for k, v := range labels {
		if strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
			return fmt.Errorf("remove labelled objects: label %q has an empty value: that would select every object carrying the key", k)
		}
	}
	return nil
}

func selectorString(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for k, v := range labels {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
