package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"
)

// ContainerSpec describes a container to create.
type ContainerSpec struct {
	Name       string
	Hostname   string
	Image      string
	Labels     map[string]string
	Env        []string
	Entrypoint []string
	Cmd        []string
	Tty        bool
	// Privileged with seccomp and AppArmor unconfined: what a node needs to
	// run systemd, containerd and the kubelet.
	Privileged bool
	Tmpfs      map[string]string
	// Volumes maps a named volume to the path it is mounted at. Should the
	// engine have to create one (it was removed, or never made), it carries
	// the container's labels, so that label-based cleanup still finds it.
	Volumes map[string]string
	// Binds are host paths, "src:dst[:ro]".
	Binds []string
	// Network the container joins, with its name as DNS alias.
	Network string
	// Aliases are more DNS names of the container on Network.
	Aliases []string
	// Ports publishes container ports on the host.
	Ports []PortBinding
	// StopSignal sent by a stop (for systemd, SIGRTMIN+3).
	StopSignal string
	// AutoRemove deletes the container when it exits.
	AutoRemove bool
	// Runtime is the OCI runtime to run it with; "" is the engine default.
	Runtime string
	// CgroupnsMode is "private" or "host"; "" is the engine default
	// (dockerd --default-cgroupns-mode). Needs Engine API 1.41.
	CgroupnsMode string
}

// podmanVolumeOptions are the options of a named volume on podman: those
// Docker gives it.
const podmanVolumeOptions = "suid,exec,dev"

// PortBinding publishes ContainerPort/tcp on HostIP:HostPort; an empty
// HostPort lets the engine choose one.
type PortBinding struct {
	HostIP        string
	HostPort      string
	ContainerPort int
}

// Container is what kindtest needs to know of a container.
type Container struct {
	ID       string
	Name     string
	Image    string
	Labels   map[string]string
	Running  bool
	Status   string
	ExitCode int
	// Pid is the main process's id on the engine's host (0 when stopped).
	Pid int
	// IPs by network name.
	IPs map[string]string
	// IPv6s by network name, for networks with IPv6.
	IPv6s map[string]string
	// Gateways by network name: the engine host's address on each
	// network, what the container reaches its host at.
	Gateways map[string]string
	// Gateways6 by network name, for networks with IPv6: the engine
	// host's IPv6 address on each.
	Gateways6 map[string]string
	// Subnets by network name: the network's IPv4 range, as the
	// container's address and prefix length give it.
	Subnets map[string]netip.Prefix
	// Ports maps "6443/tcp" to the host address it is published on.
	Ports map[string]string
	// NetworkMode is the container's network mode: "bridge", "host",
	// "none", "container:<id>" or a network's name.
	NetworkMode string
	// Mounts are its bind mounts and volumes.
	Mounts []Mount
}

// Mount is one of a container's mounts: Source on the engine's host,
// Destination inside the container.
type Mount struct {
	Source      string
	Destination string
}

// CreateContainer creates (but does not start) a container and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, spec ContainerSpec) (string, error) {
	cfg := &container.Config{
		Hostname:     spec.Hostname,
		Image:        spec.Image,
		Labels:       spec.Labels,
		Env:          spec.Env,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Tty:          spec.Tty,
		StopSignal:   spec.StopSignal,
		ExposedPorts: nat.PortSet{},
	}
	host := &container.HostConfig{
		Privileged:   spec.Privileged,
		Tmpfs:        spec.Tmpfs,
		Binds:        spec.Binds,
		AutoRemove:   spec.AutoRemove,
		PortBindings: nat.PortMap{},
		// The image's entrypoint must be PID 1 so that it can exec systemd.
		Init:         new(bool),
		Runtime:      spec.Runtime,
		CgroupnsMode: container.CgroupnsMode(spec.CgroupnsMode),
	}
	if spec.Privileged {
		host.SecurityOpt = []string{"seccomp=unconfined", "apparmor=unconfined", "label=disable"}
	}
	for name, target := range spec.Volumes {
		if c.engine.podman {
			// podman mounts named volumes nosuid,nodev, where Docker's are
			// suid, exec and dev, which a node's /var needs (setuid
			// programs of pods, device nodes of containerd's snapshots).
			// Only a bind's options can say otherwise (the API's Mount has
			// no field for them); Docker refuses them, podman takes them.
			// A volume podman creates for a bind carries no labels: the
			// callers create theirs first.
			host.Binds = append(host.Binds, name+":"+target+":"+podmanVolumeOptions)
			continue
		}
		host.Mounts = append(host.Mounts, mount.Mount{
			Type: mount.TypeVolume, Source: name, Target: target,
			VolumeOptions: &mount.VolumeOptions{Labels: spec.Labels},
		})
	}
	for _, p := range spec.Ports {
		port := nat.Port(strconv.Itoa(p.ContainerPort) + "/tcp")
		cfg.ExposedPorts[port] = struct{}{}
		host.PortBindings[port] = append(host.PortBindings[port], nat.PortBinding{HostIP: p.HostIP, HostPort: p.HostPort})
	}
	var netCfg *network.NetworkingConfig
	if spec.Network == "none" {
		host.NetworkMode = "none"
	} else if spec.Network != "" {
		host.NetworkMode = container.NetworkMode(spec.Network)
		netCfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			spec.Network: {Aliases: append([]string{spec.Name}, spec.Aliases...)},
		}}
	}
	resp, err := c.api.ContainerCreate(ctx, cfg, host, netCfg, nil, spec.Name)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	return resp.ID, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	if err := c.api.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	return nil
}

// StopContainer stops a running container: the engine sends its stop
// signal and, after timeout, kills it. A container that is not running
// counts as stopped.
func (c *Client) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	secs := int(timeout.Seconds())
	if err := c.api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// RemoveContainer force-removes a container and its anonymous volumes. A
// container that does not exist counts as removed.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	if c.engine.podman {
		// podman's forced removal stops the container first, with its
		// stop signal and stop timeout (10 s): a node whose entrypoint
		// still waits for the boot signal ignores systemd's SIGRTMIN+3.
		// Docker's sends SIGKILL at once; so does this. A container that
		// is not running, or gone, refuses the kill, which is no matter.
		_ = c.api.ContainerKill(ctx, id, "SIGKILL")
	}
	err := c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// KillContainer sends a signal (for example "SIGUSR1") to a container's
// main process.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	if err := c.api.ContainerKill(ctx, id, signal); err != nil {
		return fmt.Errorf("signal %s to container %s: %w", signal, id, err)
	}
	return nil
}

// InspectContainer describes one container.
func (c *Client) InspectContainer(ctx context.Context, id string) (Container, error) {
	info, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return Container{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	out := Container{
		ID:        info.ID,
		Name:      strings.TrimPrefix(info.Name, "/"),
		IPs:       map[string]string{},
		IPv6s:     map[string]string{},
		Gateways:  map[string]string{},
		Gateways6: map[string]string{},
		Subnets:   map[string]netip.Prefix{},
		Ports:     map[string]string{},
	}
	if info.Config != nil {
		out.Image = info.Config.Image
		out.Labels = info.Config.Labels
	}
	if info.HostConfig != nil {
		out.NetworkMode = string(info.HostConfig.NetworkMode)
	}
	if c.engine.podman && info.NetworkSettings != nil {
		out.NetworkMode = podmanNetworkMode(out.NetworkMode, info.NetworkSettings.Networks)
	}
	for _, m := range info.Mounts {
		out.Mounts = append(out.Mounts, Mount{Source: m.Source, Destination: m.Destination})
	}
	if info.State != nil {
		out.Running = info.State.Running
		out.Status = info.State.Status
		out.ExitCode = info.State.ExitCode
		out.Pid = info.State.Pid
	}
	if info.NetworkSettings != nil {
		for name, ep := range info.NetworkSettings.Networks {
			if ep == nil {
				continue
			}
			out.IPs[name] = ep.IPAddress
			out.Gateways[name] = ep.Gateway
			if ep.GlobalIPv6Address != "" {
				out.IPv6s[name] = ep.GlobalIPv6Address
				out.Gateways6[name] = ep.IPv6Gateway
			}
			if a, err := netip.ParseAddr(ep.IPAddress); err == nil && ep.IPPrefixLen > 0 {
				out.Subnets[name] = netip.PrefixFrom(a, ep.IPPrefixLen).Masked()
			}
		}
		for port, bindings := range info.NetworkSettings.Ports {
			for _, b := range bindings {
				if ap, err := netip.ParseAddr(b.HostIP); err == nil && ap.Is4() {
					out.Ports[string(port)] = netip.AddrPortFrom(ap, parsePort(b.HostPort)).String()
				}
			}
		}
	}
	return out, nil
}

// podmanNetworkMode is the network mode Docker would report for a
// container of podman: podman says "bridge" for a container on any bridge
// network of its own, where Docker names the network it was created on.
func podmanNetworkMode(mode string, networks map[string]*network.EndpointSettings) string {
	if mode != "bridge" || len(networks) != 1 {
		return mode
	}
	for name := range networks {
		return name
	}
	return mode
}

// parsePort reads a port number the engine reported; 0 if it is not one.
func parsePort(s string) uint16 {
	n, _ := strconv.ParseUint(s, 10, 16)
	return uint16(n)
}

// ListContainers lists the containers, running or not, that carry every
// given label (a value of "" matches any value).
func (c *Client) ListContainers(ctx context.Context, labels map[string]string) ([]Container, error) {
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]Container, 0, len(list))
	for _, s := range list {
		if !hasLabels(s.Labels, labels) {
			continue
		}
		ct := Container{ID: s.ID, Image: s.Image, Labels: s.Labels, Running: s.State == "running", Status: s.State}
		if len(s.Names) > 0 {
			ct.Name = strings.TrimPrefix(s.Names[0], "/")
		}
		out = append(out, ct)
	}
	return out, nil
}

// ContainerLogs returns the last tail lines of a container's output
// (stdout and stderr interleaved as far as the engine keeps them).
func (c *Client) ContainerLogs(ctx context.Context, id string, tail int) (string, error) {
	rc, err := c.api.ContainerLogs(ctx, id, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(tail), Timestamps: false,
	})
	if err != nil {
		return "", fmt.Errorf("logs of container %s: %w", id, err)
	}
	defer rc.Close()
	info, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return "", fmt.Errorf("inspect container %s: %w", id, err)
	}
	var buf bytes.Buffer
	if info.Config != nil && info.Config.Tty {
		_, err = io.Copy(&buf, rc)
	} else {
		_, err = stdcopy.StdCopy(&buf, &buf, rc)
	}
	if err != nil {
		return buf.String(), fmt.Errorf("read logs of container %s: %w", id, err)
	}
	return buf.String(), nil
}

// CommitContainer makes an image from a container's file system, applying
// Dockerfile instructions in changes, and returns the image ID.
func (c *Client) CommitContainer(ctx context.Context, id, ref string, changes []string) (string, error) {
	resp, err := c.api.ContainerCommit(ctx, id, container.CommitOptions{Reference: ref, Changes: changes})
	if err != nil {
		return "", fmt.Errorf("commit container %s as %s: %w", id, ref, err)
	}
	return resp.ID, nil
}

// CopyToContainer extracts a tar stream into dir inside the container.
func (c *Client) CopyToContainer(ctx context.Context, id, dir string, tarStream io.Reader) error {
	if err := c.api.CopyToContainer(ctx, id, dir, tarStream, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copy into container %s:%s: %w", id, dir, err)
	}
	return nil
}

// CopyFromContainer returns a tar stream of path inside the container.
func (c *Client) CopyFromContainer(ctx context.Context, id, path string) (io.ReadCloser, error) {
	rc, _, err := c.api.CopyFromContainer(ctx, id, path)
	if err != nil {
		return nil, fmt.Errorf("copy from container %s:%s: %w", id, path, err)
	}
	return rc, nil
}

// hasLabels says whether an object's labels hold every one of the
// selector's: the key alone where the selector's value is empty. Lists
// check it again on what the engine returned: podman 4.3's volume list
// matches any of several label filters, not all.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// labelFilter turns labels into an engine filter; an empty value matches
// any value of that key.
func labelFilter(labels map[string]string) filters.Args {
	args := filters.NewArgs()
	for k, v := range labels {
		if v == "" {
			args.Add("label", k)
		} else {
			args.Add("label", k+"="+v)
		}
	}
	return args
}

// InspectContainerJSON returns the engine's full description of a
// container, as JSON, for diagnostics.
func (c *Client) InspectContainerJSON(ctx context.Context, id string) ([]byte, error) {
	_, raw, err := c.api.ContainerInspectWithRaw(ctx, id, false)
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", id, err)
	}
	return raw, nil
}

// RunOnce creates a container from spec, starts it, waits for it to exit
// and removes it, returning its exit code and the last lines of its
// output. A container that cannot start is an error.
func (c *Client) RunOnce(ctx context.Context, spec ContainerSpec) (int, string, error) {
	id, err := c.CreateContainer(ctx, spec)
	if err != nil {
		return 0, "", err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.RemoveContainer(rctx, id)
	}()
	code, err := c.StartAndWait(ctx, id)
	if err != nil {
		return code, "", err
	}
	logs, err := c.ContainerLogs(ctx, id, 20)
	if err != nil {
		return code, "", err
	}
	return code, logs, nil
}

// StartAndWait starts a created container and waits for it to exit,
// returning its exit code.
func (c *Client) StartAndWait(ctx context.Context, id string) (int, error) {
	// Waiting from before the start does not miss a quick exit.
	waitC, errC := c.api.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := c.StartContainer(ctx, id); err != nil {
		return 0, err
	}
	select {
	case res := <-waitC:
		if res.Error != nil && res.Error.Message != "" {
			return int(res.StatusCode), fmt.Errorf("wait for container %s: %s", id, res.Error.Message)
		}
		return int(res.StatusCode), nil
	case err := <-errC:
		return 0, fmt.Errorf("wait for container %s: %w", id, err)
	}
}
