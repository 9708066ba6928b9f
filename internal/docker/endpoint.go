package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// endpoint is the engine the client talks to, and where that choice came
// from, for messages.
type endpoint struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "tcp://10.0.0.2:2375"); "" means the SDK's default (DOCKER_HOST or
	// the platform's socket).
	Host string
	// Source says where Host came from: "DOCKER_HOST", `docker context
	// "colima" (DOCKER_CONTEXT)`, "the default socket".
	Source string
	// TLSDir holds ca.pem, cert.pem and key.pem of a context, if it has any.
	TLSDir string
	// SkipTLSVerify is a context's skip-tls-verify setting.
	SkipTLSVerify bool
}

// resolveEndpoint picks the engine the way the docker CLI does when given
// no flags: DOCKER_HOST wins; else DOCKER_CONTEXT; else the currentContext
// of the CLI's config.json (in DOCKER_CONFIG, or ~/.docker). The context
// "default" means DOCKER_HOST or the platform's socket. A named context
// that does not exist is an error: the CLI refuses it too, and falling back
// to another engine would run the tests somewhere the user did not mean.
func resolveEndpoint(getenv func(string) string) (endpoint, error) {
	if h := getenv("DOCKER_HOST"); h != "" {
		return endpoint{Host: h, Source: "DOCKER_HOST"}, nil
	}
	configDir := getenv("DOCKER_CONFIG")
	if configDir == "" {
		home := getenv("HOME")
		if home == "" {
			return endpoint{Source: "the default socket"}, nil
		}
		configDir = filepath.Join(home, ".docker")
	}
	name, source := getenv("DOCKER_CONTEXT"), "DOCKER_CONTEXT"
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
		return endpoint{Source: "the default socket"}, nil
	}
	return contextEndpoint(configDir, name, source)
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
