package docker

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

// Network is what kindtest needs to know of a network.
type Network struct {
	ID     string
	Name   string
	Labels map[string]string
}

// CreateNetwork creates a labelled bridge network and returns its ID. The
// engine picks the IPv4 subnet from its address pools. A valid ipv6
// prefix also gives the network that IPv6 range (engines before 27.0
// pick none themselves), so that its containers have an address of each
// family.
func (c *Client) CreateNetwork(ctx context.Context, name string, labels map[string]string, ipv6 netip.Prefix) (string, error) {
	opts := network.CreateOptions{
		Driver: "bridge",
		Labels: labels,
		Options: map[string]string{
			// Nodes reach each other and the outside; pods behind them do too.
			"com.docker.network.bridge.enable_ip_masquerade": "true",
		},
	}
	if ipv6.IsValid() {
		on := true
		opts.EnableIPv6 = &on
		opts.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: ipv6.String()}}}
	}
	resp, err := c.api.NetworkCreate(ctx, name, opts)
	if err != nil {
		return "", fmt.Errorf("create network %s: %w", name, err)
	}
	return resp.ID, nil
}

// RemoveNetwork removes a network; one that does not exist counts as
// removed. Containers still connected (a test process's own container that
// joined it) are disconnected first.
func (c *Client) RemoveNetwork(ctx context.Context, id string) error {
	err := c.api.NetworkRemove(ctx, id)
	if err == nil || IsNotFound(err) {
		return nil
	}
	if info, ierr := c.api.NetworkInspect(ctx, id, network.InspectOptions{}); ierr == nil && len(info.Containers) > 0 {
		for ctr := range info.Containers {
			_ = c.api.NetworkDisconnect(ctx, id, ctr, true)
		}
		err = c.api.NetworkRemove(ctx, id)
		if err == nil || IsNotFound(err) {
			return nil
		}
	}
	return fmt.Errorf("remove network %s: %w", id, err)
}

// ConnectNetwork attaches a running container to a network.
func (c *Client) ConnectNetwork(ctx context.Context, networkID, containerID string) error {
	if err := c.api.NetworkConnect(ctx, networkID, containerID, nil); err != nil {
		return fmt.Errorf("connect container %.12s to network %s: %w", containerID, networkID, err)
	}
	return nil
}

// DisconnectNetwork detaches a container from a network; either being gone
// counts as done.
func (c *Client) DisconnectNetwork(ctx context.Context, networkID, containerID string) error {
	if err := c.api.NetworkDisconnect(ctx, networkID, containerID, true); err != nil && !IsNotFound(err) {
		return fmt.Errorf("disconnect container %.12s from network %s: %w", containerID, networkID, err)
	}
	return nil
}

// ListNetworks lists the networks that carry every given label.
func (c *Client) ListNetworks(ctx context.Context, labels map[string]string) ([]Network, error) {
	list, err := c.api.NetworkList(ctx, network.ListOptions{Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := make([]Network, 0, len(list))
	for _, n := range list {
		if !hasLabels(n.Labels, labels) {
			continue
		}
		out = append(out, Network{ID: n.ID, Name: n.Name, Labels: n.Labels})
	}
	return out, nil
}

// Volume is what kindtest needs to know of a volume.
type Volume struct {
	Name   string
	Labels map[string]string
}

// CreateVolume creates a labelled local volume.
func (c *Client) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	if _, err := c.api.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels}); err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	return nil
}

// RemoveVolume removes a volume; one that does not exist counts as removed.
func (c *Client) RemoveVolume(ctx context.Context, name string) error {
	if err := c.api.VolumeRemove(ctx, name, true); err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}

// ListVolumes lists the volumes that carry every given label.
func (c *Client) ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error) {
	resp, err := c.api.VolumeList(ctx, volume.ListOptions{Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	out := make([]Volume, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		if v != nil && hasLabels(v.Labels, labels) {
			out = append(out, Volume{Name: v.Name, Labels: v.Labels})
		}
	}
	return out, nil
}
