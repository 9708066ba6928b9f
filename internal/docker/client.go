package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// ErrUnavailable is returned (wrapped) by New when no Docker engine answers.
var ErrUnavailable = errors.New("no Docker engine answers")

// Client talks to one Docker engine.
type Client struct {
	api *client.Client
}

// New connects to the engine named by the environment (DOCKER_HOST,
// DOCKER_TLS_VERIFY, DOCKER_CERT_PATH), negotiates the API version and pings
// it. When the engine does not answer the error wraps ErrUnavailable.
func New(ctx context.Context) (*Client, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := api.Ping(pingCtx); err != nil {
		api.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s (%v): start Docker, or point DOCKER_HOST at a running engine", ErrUnavailable, api.DaemonHost(), err)
	}
	// Ping negotiated the version; make sure later calls use it.
	api.NegotiateAPIVersion(ctx)
	return &Client{api: api}, nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// Host is the engine address the client uses, for messages.
func (c *Client) Host() string { return c.api.DaemonHost() }

// APIVersion is the negotiated Engine API version.
func (c *Client) APIVersion() string { return c.api.ClientVersion() }

// IsNotFound reports whether err says an object does not exist.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// IsConflict reports whether err says an object is in a conflicting state,
// for example a removal that is already in progress.
func IsConflict(err error) bool { return cerrdefs.IsConflict(err) }

// EngineInfo is what the library needs to know about the engine.
type EngineInfo struct {
	Version string
	// CgroupVersion is "1" or "2"; engines older than 20.10 leave it empty
	// (they run on cgroup v1 only).
	CgroupVersion string
	CgroupDriver  string
	OS            string
	NCPU          int
	MemTotal      int64
}

// Info describes the engine.
func (c *Client) Info(ctx context.Context) (EngineInfo, error) {
	info, err := c.api.Info(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("engine info: %w", err)
	}
	return EngineInfo{
		Version:       info.ServerVersion,
		CgroupVersion: info.CgroupVersion,
		CgroupDriver:  info.CgroupDriver,
		OS:            info.OperatingSystem,
		NCPU:          info.NCPU,
		MemTotal:      info.MemTotal,
	}, nil
}
