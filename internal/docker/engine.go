package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
)

// The engine behind the API: Docker's own daemon, or podman answering
// through its Docker-compatible service (`podman system service`). The
// two differ in ways the API's types do not show, which the calls of this
// package handle where they arise (see Podman).

// engine is what the engine's version response says it is.
type engine struct {
	podman bool
	// version is the engine's own version ("26.1.5", podman's "5.4.2"),
	// "" when the engine did not say.
	version string
}

// loadedName is the name of an image the engine says it loaded as ref, as
// the archive named it: podman reports an unqualified name ("kindtest/node:v1")
// with its own registry prefix, "localhost/", and answers to the name
// without it as well.
func (e engine) loadedName(ref string) string {
	if e.podman {
		return strings.TrimPrefix(ref, "localhost/")
	}
	return ref
}

// MinPodmanVersion is the oldest podman kindtest works with, through its
// Docker-compatible API: the oldest verified (Debian bookworm's).
const MinPodmanVersion = "4.3.0"

// engineOf reads the version response: podman names itself in its
// components ("Podman Engine"), which Docker's list as "Engine",
// "containerd", "runc" and "docker-init".
func engineOf(v types.Version) engine {
	e := engine{version: v.Version}
	for _, c := range v.Components {
		if strings.HasPrefix(c.Name, "Podman") {
			e.podman = true
			if c.Version != "" {
				e.version = c.Version
			}
		}
	}
	if strings.Contains(strings.ToLower(v.Platform.Name), "podman") {
		e.podman = true
	}
	return e
}

// String names the engine for messages: "Docker 26.1.5", "Podman 5.4.2".
func (e engine) String() string {
	name := "Docker"
	if e.podman {
		name = "Podman"
	}
	if e.version == "" {
		return name
	}
	return name + " " + e.version
}

// check refuses a podman older than MinPodmanVersion, whatever API version
// it reports.
func (e engine) check(host string) error {
	if !e.podman || e.version == "" {
		return nil
	}
	if versions.LessThan(podmanRelease(e.version), MinPodmanVersion) {
		return fmt.Errorf("the engine at %s is %s; kindtest needs podman %s or newer (its Docker-compatible API, `podman system service`): upgrade podman, or point DOCKER_HOST at a Docker engine", host, e, MinPodmanVersion)
	}
	return nil
}

// podmanRelease is the numeric part of a podman version ("4.3.1" of
// "4.3.1-dev").
func podmanRelease(v string) string {
	if i := strings.IndexFunc(v, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		return v[:i]
	}
	return v
}

// detectEngine asks the engine what it is. An engine whose version
// response fails counts as Docker of an unknown version, as before the
// question was asked: every Docker engine kindtest supports answers it.
func (c *Client) detectEngine(ctx context.Context) {
	if v, err := c.api.ServerVersion(ctx); err == nil {
		c.engine = engineOf(v)
	}
}

// Podman reports whether the engine is podman's Docker-compatible service.
func (c *Client) Podman() bool { return c.engine.podman }

// EngineName names the engine and its version, for messages: "Docker
// 26.1.5", "Podman 5.4.2".
func (c *Client) EngineName() string { return c.engine.String() }

// podmanInfo is the part of podman's own info (its libpod API, which the
// same socket serves beside the Docker-compatible one) that the
// compatible info lacks or gets wrong.
type podmanInfo struct {
	Host struct {
		// CgroupControllers are the cgroup v2 controllers podman finds
		// available to it.
		CgroupControllers []string `json:"cgroupControllers"`
		Security          struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
}

// podmanInfo asks podman's libpod API what its Docker-compatible info
// cannot say. That info lists no "rootless" among the security options of
// a rootless podman 4.3 (only apparmor and seccomp, seen in the cgroup v2
// guest), and on cgroup v2 it fills its limits from cgroup v1's file
// names (cpu.shares, cpu.cfs_quota_us, cpuset.cpus at the root): no cpu
// and no cpuset whatever was delegated (docker info against it warns "No
// cpu shares support", "No cpuset support").
func (c *Client) podmanInfo(ctx context.Context) (podmanInfo, error) {
	var info podmanInfo
	url, err := c.libpodURL("/info")
	if err != nil {
		return info, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return info, err
	}
	resp, err := c.api.HTTPClient().Do(req)
	if err != nil {
		return info, fmt.Errorf("podman's libpod info: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return info, fmt.Errorf("podman's libpod info: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&info); err != nil {
		return info, fmt.Errorf("podman's libpod info: %w", err)
	}
	return info, nil
}

// controllers are those of cpu, cpuset, memory and pids podman names.
func (p podmanInfo) controllers() []string {
	have := p.Host.CgroupControllers
	return controllers(slices.Contains(have, "cpu"), slices.Contains(have, "cpuset"),
		slices.Contains(have, "memory"), slices.Contains(have, "pids"))
}

// libpodURL is the URL of path in podman's libpod API (v4.0.0's paths,
// which podman 4 and 5 serve) on the engine this client talks to, as the
// SDK builds its own: a socket's requests carry a placeholder host, and a
// TCP engine's are HTTPS when the client has TLS material.
func (c *Client) libpodURL(path string) (string, error) {
	u, err := client.ParseHostURL(c.api.DaemonHost())
	if err != nil {
		return "", err
	}
	scheme, host := "http", u.Host
	switch u.Scheme {
	case "unix", "npipe":
		host = client.DummyHost
	default:
		if t, ok := c.api.HTTPClient().Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
			scheme = "https"
		}
	}
	return scheme + "://" + host + u.Path + "/v4.0.0/libpod" + path, nil
}
