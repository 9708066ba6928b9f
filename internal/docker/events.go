package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// Created streams the names of the containers, networks and volumes the
// engine creates from since on (what it created between since and the
// call included), until ctx ends or the stream fails: the channel is
// closed then. It returns once the engine has answered the subscription.
func (c *Client) Created(ctx context.Context, since time.Time) <-chan string {
	args := filters.NewArgs(
		filters.Arg("event", "create"),
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("type", string(events.NetworkEventType)),
		filters.Arg("type", string(events.VolumeEventType)),
	)
	msgs, errs := c.api.Events(ctx, events.ListOptions{Since: fmt.Sprint(since.Unix()), Filters: args})
	out := make(chan string)
	go func() {
		defer close(out)
		for {
			select {
			case m := <-msgs:
				select {
				case out <- createdName(m):
				case <-ctx.Done():
					return
				}
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// createdName is the name of what a create event is about. Docker names a
// volume by its actor's ID and the rest by a "name" attribute; podman
// leaves a volume's ID empty, names it by the attribute, and names a
// network by a "network" attribute.
func createdName(m events.Message) string {
	attrs := m.Actor.Attributes
	switch {
	case m.Type == events.VolumeEventType && m.Actor.ID != "":
		return m.Actor.ID
	case attrs["name"] != "":
		return attrs["name"]
	case m.Type == events.NetworkEventType && attrs["network"] != "":
		return attrs["network"]
	}
	return m.Actor.ID
}
