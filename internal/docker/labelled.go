package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/poll"
)

// RemoveLabelled removes the containers, then the volumes, then the
// networks that carry every given label, in parallel within each kind, and
// returns once none is left. Things already gone count as removed. A
// failed round is retried, with backoff, until ctx ends: a removal that
// conflicts with another one in progress (another handle or process
// deleting the same cluster: "removal already in progress", a volume still
// in use, a network with endpoints) waits for it, and a transient engine
// failure (under load: "tried to kill container, but did not receive an
// exit event") gets another try. When ctx ends first, the last round's
// failures are reported together.
//
// An empty selector would select every object on the engine and is
// refused, as is a blank value; an empty value selects any value of its
// key (as in ListContainers), which callers must mean: kindtest's own
// removal paths check cluster names before they get here.
func (c *Client) RemoveLabelled(ctx context.Context, labels map[string]string) error {
	if err := checkSelector(labels); err != nil {
		return err
	}
	var n int
	var last error
	thawed := &thawOnce{tried: map[string]bool{}}
	err := poll.Until(ctx, 50*time.Millisecond, time.Second, func() (bool, error) {
		n, last = c.removeRound(ctx, labels, thawed)
		return n == 0 && last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last == nil {
		last = fmt.Errorf("%d object(s) still there", n)
	}
	return fmt.Errorf("remove objects labelled %s: %w (%w)", selectorString(labels), err, last)
}

// thawOnce remembers the containers a removal has tried to thaw (see
// thawFrozen): once each is enough.
type thawOnce struct {
	mu    sync.Mutex
	tried map[string]bool
}

func (t *thawOnce) first(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tried[id] {
		return false
	}
	t.tried[id] = true
	return true
}

// removeRound lists and removes what carries the labels once, returning how
// many objects it found. A container the engine fails to remove (not one
// being removed already) is thawed, once, before the next round: on a
// cgroup v1 host a frozen process keeps it from ever exiting.
func (c *Client) removeRound(ctx context.Context, labels map[string]string, thawed *thawOnce) (int, error) {
	containers, err := c.ListContainers(ctx, labels)
	if err != nil {
		return 0, err
	}
	errs := []error{concurrent.Each(len(containers), func(i int) error {
		id := containers[i].ID
		err := c.RemoveContainer(ctx, id)
		if err != nil && !IsConflict(err) && !IsUnreachable(err) && thawed.first(id) {
			if cgroups, terr := c.thawFrozen(ctx, id); terr != nil {
				err = errors.Join(err, terr)
			} else if len(cgroups) > 0 {
				err = fmt.Errorf("%w (thawed %d frozen cgroup(s) of it: %s)", err, len(cgroups), strings.Join(cgroups, ", "))
			}
		}
		return err
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
		if strings.TrimSpace(k) == "" {
			return errors.New("remove labelled objects: an empty label key")
		}
		if v != "" && strings.TrimSpace(v) == "" {
			return fmt.Errorf("remove labelled objects: label %q has a blank value %q", k, v)
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
