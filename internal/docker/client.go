package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/tlsconfig"
)

// ErrUnavailable is returned (wrapped) by New when no Docker engine answers.
var ErrUnavailable = errors.New("no Docker engine answers")

// MinAPIVersion is the oldest Engine API kindtest works with: Docker 20.10.
const MinAPIVersion = "1.41"

// Client talks to one Docker engine.
type Client struct {
	api    *client.Client
	source string
	engine engine
}

// New connects to the engine the docker CLI would use (see resolveEndpoint:
// DOCKER_HOST, then DOCKER_CONTEXT, then the CLI's current context, then
// the usual engines' sockets or, on Windows, the engine's named pipe),
// negotiates the API version and pings it. When the engine does not answer
// the error wraps ErrUnavailable; an engine older than MinAPIVersion is
// refused.
func New(ctx context.Context) (*Client, error) {
	ep, err := resolveEndpoint(thisHost())
	if err != nil {
		return nil, err
	}
	return connect(ctx, ep)
}

// NewHost connects to the engine at host ("unix:///path", "tcp://a:p"),
// whatever the environment says.
func NewHost(ctx context.Context, host string) (*Client, error) {
	return connect(ctx, endpoint{Host: host, Source: "an explicit host"})
}

func connect(ctx context.Context, ep endpoint) (*Client, error) {
	opts, err := clientOptions(ep)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", ep.Source, err)
	}
	api, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", ep.Source, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := api.Ping(pingCtx)
	if err != nil {
		api.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s, named by %s (%v): start Docker, or point DOCKER_HOST (or DOCKER_CONTEXT) at a running engine", ErrUnavailable, api.DaemonHost(), ep.Source, err)
	}
	if ping.OSType == "windows" {
		api.Close()
		return nil, fmt.Errorf("the engine at %s, named by %s, runs Windows containers; kindtest's nodes are Linux containers: switch Docker Desktop to Linux containers, or point DOCKER_HOST (or DOCKER_CONTEXT) at a Linux engine", api.DaemonHost(), ep.Source)
	}
	// Ping negotiated the version; make sure later calls use it.
	api.NegotiateAPIVersion(ctx)
	c := &Client{api: api, source: ep.Source}
	c.detectEngine(pingCtx)
	if err := c.checkVersion(ping.APIVersion); err != nil {
		api.Close()
		return nil, err
	}
	if err := c.engine.check(c.Host()); err != nil {
		api.Close()
		return nil, err
	}
	return c, nil
}

// clientOptions turns an endpoint into SDK options. DOCKER_HOST keeps the
// SDK's own reading of the environment (DOCKER_HOST, DOCKER_TLS_VERIFY,
// DOCKER_CERT_PATH, DOCKER_API_VERSION).
func clientOptions(ep endpoint) ([]client.Opt, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if ep.Host == "" || ep.Source == "DOCKER_HOST" {
		return opts, nil
	}
	if u, err := url.Parse(ep.Host); err == nil && u.Scheme == "ssh" {
		return nil, fmt.Errorf("%s is an ssh:// engine, which kindtest cannot reach directly: forward its socket (ssh -nNT -L /tmp/docker.sock:/var/run/docker.sock HOST) and set DOCKER_HOST=unix:///tmp/docker.sock", ep.Host)
	}
	if ep.TLSDir != "" || ep.SkipTLSVerify {
		tlsOpts := tlsconfig.Options{InsecureSkipVerify: ep.SkipTLSVerify}
		if ep.TLSDir != "" {
			for file, field := range map[string]*string{"ca.pem": &tlsOpts.CAFile, "cert.pem": &tlsOpts.CertFile, "key.pem": &tlsOpts.KeyFile} {
				if p := filepath.Join(ep.TLSDir, file); fileExists(p) {
					*field = p
				}
			}
		}
		tc, err := tlsconfig.Client(tlsOpts)
		if err != nil {
			return nil, fmt.Errorf("TLS material in %s: %w", ep.TLSDir, err)
		}
		opts = append(opts, client.WithHTTPClient(&http.Client{
			Transport:     &http.Transport{TLSClientConfig: tc},
			CheckRedirect: client.CheckRedirect,
		}))
	}
	return append(opts, client.WithHost(ep.Host)), nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkVersion refuses an engine whose API is older than MinAPIVersion, or
// a client pinned below it with DOCKER_API_VERSION.
func (c *Client) checkVersion(serverAPI string) error {
	if serverAPI != "" && versions.LessThan(serverAPI, MinAPIVersion) {
		engine := "an engine"
		if c.engine.version != "" {
			engine = c.engine.String()
		}
		need := "Docker 20.10"
		if c.engine.podman {
			need = "podman " + MinPodmanVersion
		}
		return fmt.Errorf("the engine at %s is %s with API %s; kindtest needs API %s (%s) or newer: upgrade the engine, or point DOCKER_HOST at a newer one", c.Host(), engine, serverAPI, MinAPIVersion, need)
	}
	if v := c.api.ClientVersion(); versions.LessThan(v, MinAPIVersion) {
		return fmt.Errorf("the Docker client is pinned to API %s (DOCKER_API_VERSION); kindtest needs %s or newer: unset DOCKER_API_VERSION", v, MinAPIVersion)
	}
	return nil
}

// SDKAPIVersion is the newest Engine API the SDK speaks. Negotiation
// settles on the lower of it and the engine's own.
const SDKAPIVersion = api.DefaultVersion

// APIVersions are the Engine API versions of one client and its engine.
type APIVersions struct {
	// Negotiated is the version the client's requests use.
	Negotiated string
	// Engine and EngineMin are the newest and the oldest version the
	// engine serves; EngineVersion is the engine's own version.
	Engine, EngineMin, EngineVersion string
}

// APIVersions asks the engine for its versions, beside the one the client
// negotiated.
func (c *Client) APIVersions(ctx context.Context) (APIVersions, error) {
	v, err := c.api.ServerVersion(ctx)
	if err != nil {
		return APIVersions{}, fmt.Errorf("engine version: %w", err)
	}
	return APIVersions{Negotiated: c.api.ClientVersion(), Engine: v.APIVersion, EngineMin: v.MinAPIVersion, EngineVersion: v.Version}, nil
}

// Check reports whether negotiation did what it should: settle on the
// newest version both sides speak (the engine's, or the SDK's where the
// engine is newer), which the engine serves and kindtest accepts. A
// client left at a fallback (1.24 where a ping carried no version) or
// pinned elsewhere fails it.
func (v APIVersions) Check() error {
	want := v.Engine
	if versions.LessThan(SDKAPIVersion, want) {
		want = SDKAPIVersion
	}
	switch {
	case v.Engine == "":
		return fmt.Errorf("the engine (Docker %s) reports no API version", v.EngineVersion)
	case v.Negotiated != want:
		return fmt.Errorf("negotiated API %s with Docker %s, want %s: the newest both speak (the engine serves %s to %s, the SDK speaks up to %s)", v.Negotiated, v.EngineVersion, want, v.EngineMin, v.Engine, SDKAPIVersion)
	case v.EngineMin != "" && versions.LessThan(v.Negotiated, v.EngineMin):
		return fmt.Errorf("negotiated API %s with Docker %s, which serves %s and newer only", v.Negotiated, v.EngineVersion, v.EngineMin)
	case versions.LessThan(v.Negotiated, MinAPIVersion):
		return fmt.Errorf("negotiated API %s with Docker %s; kindtest needs %s or newer", v.Negotiated, v.EngineVersion, MinAPIVersion)
	}
	return nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// Host is the engine address the client uses, for messages.
func (c *Client) Host() string { return c.api.DaemonHost() }

// Source says what named the engine: "DOCKER_HOST", a docker context, or
// the default socket.
func (c *Client) Source() string { return c.source }

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
	// Architecture as the engine reports it: x86_64, aarch64.
	Architecture string
	// Driver is the storage driver; with the containerd image store it
	// names a snapshotter (overlayfs).
	Driver string
	// ContainerdStore is whether images live in containerd's store.
	ContainerdStore bool
	NCPU            int
	MemTotal        int64
	// KernelVersion is the engine host's kernel release (uname -r).
	KernelVersion string
	// Rootless says the engine runs as an unprivileged user, in a user
	// namespace (its security options name "rootless"; podman's own API
	// says so where its Docker-compatible info does not).
	Rootless bool
	// Podman says the engine is podman's Docker-compatible service.
	Podman bool
	// Controllers are the cgroup controllers the engine can limit its
	// containers with, among cpu, cpuset, memory and pids: on cgroup v2
	// what its own cgroup was given, which for a rootless engine is what
	// systemd delegates to the user. podman's are read from its own API
	// (see podmanInfo).
	Controllers []string
}

// archPlatforms maps the architectures engines report (uname's names, and
// Go's) to the architecture part of the platform names images carry.
var archPlatforms = map[string]string{
	"x86_64": "amd64", "amd64": "amd64",
	"aarch64": "arm64", "arm64": "arm64",
	"armv7l": "arm/v7", "arm": "arm/v7",
	"s390x": "s390x", "ppc64le": "ppc64le", "riscv64": "riscv64",
}

// Platform returns the platform of the engine's containers as images name
// theirs ("linux/amd64", "linux/arm64"), and false for an architecture it
// cannot name. Docker Desktop on a Mac reports its Linux VM's: an Apple
// Silicon Mac's engine is linux/arm64.
func (e EngineInfo) Platform() (string, bool) {
	arch, ok := archPlatforms[e.Architecture]
	if !ok {
		return "", false
	}
	return "linux/" + arch, true
}

// Info describes the engine.
func (c *Client) Info(ctx context.Context) (EngineInfo, error) {
	info, err := c.api.Info(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("engine info: %w", err)
	}
	e := EngineInfo{
		Version:         info.ServerVersion,
		CgroupVersion:   info.CgroupVersion,
		CgroupDriver:    info.CgroupDriver,
		OS:              info.OperatingSystem,
		Architecture:    info.Architecture,
		Driver:          info.Driver,
		ContainerdStore: containerdStore(info.DriverStatus),
		NCPU:            info.NCPU,
		MemTotal:        info.MemTotal,
		KernelVersion:   info.KernelVersion,
		Rootless:        rootless(info.SecurityOptions),
		Podman:          c.engine.podman,
		Controllers:     controllers(info.CPUShares && info.CPUCfsQuota, info.CPUSet, info.MemoryLimit, info.PidsLimit),
	}
	if e.Podman {
		p, err := c.podmanInfo(ctx)
		if err != nil {
			return EngineInfo{}, fmt.Errorf("engine info: %w", err)
		}
		e.Rootless = e.Rootless || p.Host.Security.Rootless
		if e.CgroupVersion == "2" {
			e.Controllers = p.controllers()
		}
	}
	return e, nil
}

// rootless tells from the engine's security options whether it runs
// rootless: Docker lists "name=rootless", podman "rootless" as well.
func rootless(opts []string) bool {
	for _, o := range opts {
		for _, kv := range strings.Split(o, ",") {
			if kv == "name=rootless" || kv == "rootless" {
				return true
			}
		}
	}
	return false
}

// controllers names the cgroup controllers behind the engine's limit
// capabilities, in a fixed order.
func controllers(cpu, cpuset, memory, pids bool) []string {
	var out []string
	for _, c := range []struct {
		name string
		ok   bool
	}{{"cpu", cpu}, {"cpuset", cpuset}, {"memory", memory}, {"pids", pids}} {
		if c.ok {
			out = append(out, c.name)
		}
	}
	return out
}

// containerdStore tells from the engine's driver status whether it keeps
// images in containerd's store: that store reports a "driver-type" of
// io.containerd.snapshotter.v1.
func containerdStore(status [][2]string) bool {
	for _, kv := range status {
		if kv[0] == "driver-type" && kv[1] == "io.containerd.snapshotter.v1" {
			return true
		}
	}
	return false
}

// IsUnreachable reports whether err says the engine could not be reached
// or stopped answering mid-call (refused, reset, cut off, a connection
// that timed out), rather than refusing a request. A request cut short by
// a context that ended, a deadline or a cancel, the caller's or
// kindtest's, is not the engine's doing and does not count, although the
// SDK reports it as a net.Error with Timeout() true. Where err joins
// several errors (a removal's deadline and its last round's failure), it
// counts when any of them says the engine is unreachable.
func IsUnreachable(err error) bool {
	for err != nil {
		if endsContext(err) {
			return false
		}
		if multi, ok := err.(interface{ Unwrap() []error }); ok {
			return slices.ContainsFunc(multi.Unwrap(), IsUnreachable)
		}
		if errno, ok := err.(syscall.Errno); ok {
			return slices.Contains(goneErrnos, errno)
		}
		if engineGone(err) {
			return true
		}
		next := errors.Unwrap(err)
		if next == nil {
			// At the end of the chain, any network failure left is the
			// connection's own.
			var netErr net.Error
			return errors.As(err, &netErr)
		}
		err = next
	}
	return false
}

// endsContext reports whether err, itself and not what it wraps, is a
// context's end: context.Canceled, context.DeadlineExceeded, or an error
// that says it is one (the net package's dial errors for them do).
func endsContext(err error) bool {
	if err == context.Canceled || err == context.DeadlineExceeded {
		return true
	}
	is, ok := err.(interface{ Is(error) bool })
	return ok && (is.Is(context.Canceled) || is.Is(context.DeadlineExceeded))
}

// goneErrnos are the system calls' errors that say the engine is out of
// reach.
var goneErrnos = []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EPIPE}

// engineGone reports whether err, itself and not what it wraps, says the
// engine is out of reach.
func engineGone(err error) bool {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return true
	}
	// The SDK's own verdict on a dial that failed or timed out (a missing
	// socket file included); it never gives it to a context's end.
	return client.IsErrConnectionFailed(err)
}

// Answers reports whether the engine answers a ping within a few seconds,
// on a context of its own: for telling, once a context has ended, whether
// the engine still answers.
func (c *Client) Answers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.api.Ping(ctx)
	return err == nil
}
