package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// endpoint is the engine the client talks to, and where that choice came
// from, for messages.
type endpoint struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "tcp://10.0.0.2:2375", "npipe:////./pipe/docker_engine").
	Host string
	// Source says where Host came from: "DOCKER_HOST", `docker context
	// "colima" (DOCKER_CONTEXT)`, "Docker Desktop's socket (...)".
	Source string
	// TLSDir holds ca.pem, cert.pem and key.pem of a context, if it has any.
	TLSDir string
	// SkipTLSVerify is a context's skip-tls-verify setting.
	SkipTLSVerify bool
}

// hostEnv is what endpoint discovery reads from its surroundings, so that
// tests can give it any OS's: the environment, the OS, and whether a unix
// socket is at a path.
type hostEnv struct {
	getenv   func(string) string
	goos     string
	isSocket func(path string) bool
}

// thisHost is the environment and OS this process runs in.
func thisHost() hostEnv {
	return hostEnv{getenv: os.Getenv, goos: runtime.GOOS, isSocket: isSocket}
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// home is the user's home directory as the docker CLI finds it: HOME, or
// USERPROFILE on Windows.
func (h hostEnv) home() string {
	if h.goos == "windows" {
		if p := h.getenv("USERPROFILE"); p != "" {
			return p
		}
	}
	return h.getenv("HOME")
}

// resolveEndpoint picks the engine the way the docker CLI does when given
// no flags: DOCKER_HOST wins; else DOCKER_CONTEXT; else the currentContext
// of the CLI's config.json (in DOCKER_CONFIG, or ~/.docker). A named
// context that does not exist is an error: the CLI refuses it too, and
// falling back to another engine would run the tests somewhere the user
// did not mean. With no context (or "default") it looks for a socket
// where the usual engines put theirs (see defaultEndpoint).
func resolveEndpoint(h hostEnv) (endpoint, error) {
	if host := h.getenv("DOCKER_HOST"); host != "" {
		return endpoint{Host: host, Source: "DOCKER_HOST"}, nil
	}
	configDir := h.getenv("DOCKER_CONFIG")
	if configDir == "" {
		home := h.home()
		if home == "" {
			return defaultEndpoint(h)
		}
		configDir = filepath.Join(home, ".docker")
	}
	name, source := h.getenv("DOCKER_CONTEXT"), "DOCKER_CONTEXT"
	if name == "" {
		cfgPath := filepath.Join(configDir, "config.json")
		var err error
		name, err = currentContext(cfgPath)
		if err != nil {
			return endpoint{}, err
		}
		source = "currentContext in " + cfgPath
	}
	if name == "" || name == "default" {
		return defaultEndpoint(h)
	}
	return contextEndpoint(configDir, name, source)
}

// windowsPipe is the Docker engine's named pipe on Windows (Docker Desktop
// answers on it too).
const windowsPipe = "npipe:////./pipe/docker_engine"

// candidate is a place an engine's socket is usually found.
type candidate struct{ path, what string }

// socketCandidates lists, in the order tried, where engines put their
// socket on a host with no DOCKER_HOST and no docker context. On Linux the
// host's own dockerd comes first, where the docker CLI looks; on macOS the
// desktop engines' sockets in the user's home come first, since
// /var/run/docker.sock exists there only when Docker Desktop is told to
// make it. They are Unix paths: path, not filepath, joins them, so that a
// test may ask for any OS's from any other.
func socketCandidates(h hostEnv) []candidate {
	var home []candidate
	if dir := h.home(); dir != "" {
		home = []candidate{
			{path.Join(dir, ".docker", "run", "docker.sock"), "Docker Desktop's socket"},
			{path.Join(dir, ".colima", "default", "docker.sock"), "colima's socket"},
		}
		if h.goos == "linux" {
			home = append(home, candidate{path.Join(dir, ".docker", "desktop", "docker.sock"), "Docker Desktop's socket"})
		}
	}
	system := []candidate{{"/var/run/docker.sock", "the default socket"}}
	if h.goos == "linux" {
		return append(system, home...)
	}
	return append(home, system...)
}

// defaultEndpoint is the first engine socket that exists (see
// socketCandidates); on Windows, the engine's named pipe. Finding none is
// ErrUnavailable, naming every place it looked.
func defaultEndpoint(h hostEnv) (endpoint, error) {
	if h.goos == "windows" {
		return endpoint{Host: windowsPipe, Source: "the default named pipe (no DOCKER_HOST, no docker context)"}, nil
	}
	cands := socketCandidates(h)
	tried := make([]string, len(cands))
	for i, c := range cands {
		if h.isSocket(c.path) {
			return endpoint{Host: "unix://" + c.path, Source: c.what + " (no DOCKER_HOST, no docker context)"}, nil
		}
		tried[i] = c.path
	}
	return endpoint{}, fmt.Errorf("%w: DOCKER_HOST is not set, no docker context is chosen, and no engine socket is at %s: start Docker Desktop, colima or dockerd, or point DOCKER_HOST (or `docker context use`) at a running engine", ErrUnavailable, strings.Join(tried, ", "))
}

// currentContext reads the currentContext of a docker CLI config file; a
// missing file means none.
func currentContext(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read docker CLI config: %w", err)
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("docker CLI config %s is not valid JSON: %w", path, err)
	}
	return cfg.CurrentContext, nil
}

// contextEndpoint reads a context's docker endpoint from the CLI's context
// store: contexts/meta/<sha256 of the name>/meta.json, with TLS material in
// contexts/tls/<sha256 of the name>/docker/.
func contextEndpoint(configDir, name, source string) (endpoint, error) {
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	metaPath := filepath.Join(configDir, "contexts", "meta", id, "meta.json")
	data, err := os.ReadFile(metaPath)
	if errors.Is(err, os.ErrNotExist) {
		return endpoint{}, fmt.Errorf("docker context %q (from %s) does not exist: no %s; run `docker context ls` to see the contexts, or %s", name, source, metaPath, contextHint(source))
	}
	if err != nil {
		return endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string
			SkipTLSVerify bool
		}
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return endpoint{}, fmt.Errorf("docker context %q: %s is not valid JSON: %w", name, metaPath, err)
	}
	ep, ok := meta.Endpoints["docker"]
	if !ok || ep.Host == "" {
		return endpoint{}, fmt.Errorf("docker context %q (from %s) has no docker endpoint host in %s", name, source, metaPath)
	}
	out := endpoint{Host: ep.Host, Source: fmt.Sprintf("docker context %q (%s)", name, source), SkipTLSVerify: ep.SkipTLSVerify}
	tlsDir := filepath.Join(configDir, "contexts", "tls", id, "docker")
	if _, err := os.Stat(filepath.Join(tlsDir, "ca.pem")); err == nil {
		out.TLSDir = tlsDir
	} else if _, err := os.Stat(filepath.Join(tlsDir, "cert.pem")); err == nil {
		out.TLSDir = tlsDir
	}
	return out, nil
}

// contextHint says how to stop using a context that names no engine.
func contextHint(source string) string {
	if source == "DOCKER_CONTEXT" {
		return "unset DOCKER_CONTEXT"
	}
	return "`docker context use default`"
}

// vmSocket is the engine's socket inside the Linux VM that Docker Desktop,
// colima, OrbStack and Rancher Desktop run their engine in; each lets a
// container bind-mount it by that path.
const vmSocket = "/var/run/docker.sock"

// MountableSocket returns the path, on the engine's own host, of the
// socket a container must bind-mount to talk to this engine (the reaper
// does). It is not always the path this process dials: an engine in a VM
// (any engine reached from macOS or Windows, and Docker Desktop on Linux)
// is reached through a socket or pipe forwarded out of the VM, while
// inside the VM, where containers run, its socket is /var/run/docker.sock.
// A local Linux engine (rootless included) is mounted by the path this
// process dials.
func (c *Client) MountableSocket(ctx context.Context) string {
	engineOS := ""
	if runtime.GOOS == "linux" && strings.HasPrefix(c.Host(), "unix://") {
		if info, err := c.Info(ctx); err == nil {
			engineOS = info.OS
		}
	}
	return mountableSocket(c.Host(), runtime.GOOS, engineOS)
}

// mountableSocket is MountableSocket for an engine at host, reached from
// a client on goos, whose `docker info` names engineOS as its operating
// system.
func mountableSocket(host, goos, engineOS string) string {
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok || goos != "linux" || strings.Contains(engineOS, "Docker Desktop") {
		return vmSocket
	}
	return path
}
