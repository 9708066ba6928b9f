package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writeContext stores a context the way `docker context create NAME
// --docker host=HOST` does.
func writeContext(t *testing.T, configDir, name, host string) {
	t.Helper()
	sum := sha256.Sum256([]byte(name))
	dir := filepath.Join(configDir, "contexts", "meta", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf(`{"Name":%q,"Metadata":{"Description":"test"},"Endpoints":{"docker":{"Host":%q,"SkipTLSVerify":false}}}`, name, host)
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// onHost is a host of the given OS with the environment m, where a unix
// socket exists at each of sockets and nowhere else.
func onHost(goos string, m map[string]string, sockets ...string) hostEnv {
	return hostEnv{getenv: env(m), goos: goos, isSocket: func(p string) bool {
		for _, s := range sockets {
			if p == s {
				return true
			}
		}
		return false
	}}
}

func TestResolveEndpoint(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".docker")
	writeContext(t, cfg, "colima", "unix:///home/u/.colima/default/docker.sock")
	writeContext(t, cfg, "remote", "tcp://10.1.2.3:2375")
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"auths":{},"currentContext":"remote"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir() // a DOCKER_CONFIG with a context of its own
	writeContext(t, other, "ci", "tcp://10.9.9.9:2376")
	if err := os.WriteFile(filepath.Join(other, "config.json"), []byte(`{"currentContext":"ci"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()

	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantHost string
		wantSrc  string
	}{
		{"DOCKER_HOST wins over everything", map[string]string{"HOME": home, "DOCKER_HOST": "tcp://1.2.3.4:2375", "DOCKER_CONTEXT": "colima"}, "tcp://1.2.3.4:2375", "DOCKER_HOST"},
		{"DOCKER_CONTEXT wins over the current context", map[string]string{"HOME": home, "DOCKER_CONTEXT": "colima"}, "unix:///home/u/.colima/default/docker.sock", "DOCKER_CONTEXT"},
		{"current context of ~/.docker/config.json", map[string]string{"HOME": home}, "tcp://10.1.2.3:2375", "currentContext"},
		{"DOCKER_CONFIG replaces ~/.docker", map[string]string{"HOME": home, "DOCKER_CONFIG": other}, "tcp://10.9.9.9:2376", "currentContext"},
		{"context default is the default socket", map[string]string{"HOME": home, "DOCKER_CONTEXT": "default"}, "unix:///var/run/docker.sock", "default socket"},
		{"no config file", map[string]string{"HOME": empty}, "unix:///var/run/docker.sock", "default socket"},
		{"no HOME", map[string]string{}, "unix:///var/run/docker.sock", "default socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := resolveEndpoint(onHost("linux", tc.env, "/var/run/docker.sock"))
			if err != nil {
				t.Fatal(err)
			}
			if ep.Host != tc.wantHost || !strings.Contains(ep.Source, tc.wantSrc) {
				t.Errorf("got host %q from %q, want %q from %q", ep.Host, ep.Source, tc.wantHost, tc.wantSrc)
			}
		})
	}
}

func TestUnknownContext(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".docker")
	writeContext(t, cfg, "colima", "unix:///x.sock")
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"currentContext":"gone"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := resolveEndpoint(onHost("linux", map[string]string{"HOME": home, "DOCKER_CONTEXT": "nope"}))
	if err == nil || !strings.Contains(err.Error(), `docker context "nope" (from DOCKER_CONTEXT) does not exist`) || !strings.Contains(err.Error(), "unset DOCKER_CONTEXT") {
		t.Errorf("DOCKER_CONTEXT=nope: got %v", err)
	}
	_, err = resolveEndpoint(onHost("linux", map[string]string{"HOME": home}))
	if err == nil || !strings.Contains(err.Error(), `docker context "gone"`) || !strings.Contains(err.Error(), "docker context use default") {
		t.Errorf("currentContext gone: got %v", err)
	}
	// New reports it before trying any engine.
	t.Setenv("DOCKER_HOST", "")
	setHome(t, home)
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("DOCKER_CONTEXT", "nope")
	if _, err := New(context.Background()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("New: got %v", err)
	}
}

func TestBrokenConfig(t *testing.T) {
	cfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"currentContext":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveEndpoint(onHost("linux", map[string]string{"DOCKER_CONFIG": cfg})); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("got %v", err)
	}
}

// TestContextIsUsed checks that New connects where the context points: a
// fake engine (pure logic, no Docker) answering on a unix socket.
func TestContextIsUsed(t *testing.T) {
	host, hits := fakeEngine(t, "1.45", "26.1.5")
	home := t.TempDir()
	writeContext(t, filepath.Join(home, ".docker"), "fake", host)
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("DOCKER_API_VERSION", "")
	setHome(t, home)
	t.Setenv("DOCKER_CONTEXT", "fake")
	c, err := New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if *hits == 0 || c.Host() != host || !strings.Contains(c.Source(), `"fake"`) {
		t.Errorf("hits %d, host %s, source %s", *hits, c.Host(), c.Source())
	}
	if v := c.api.ClientVersion(); v != "1.45" {
		t.Errorf("negotiated %s, want 1.45", v)
	}
}

func TestEngineTooOld(t *testing.T) {
	host, _ := fakeEngine(t, "1.40", "19.03.15")
	t.Setenv("DOCKER_HOST", host)
	t.Setenv("DOCKER_API_VERSION", "")
	_, err := New(context.Background())
	if err == nil {
		t.Fatal("an API 1.40 engine was accepted")
	}
	for _, want := range []string{"Docker 19.03.15", "API 1.40", "needs API 1.41", "upgrade"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if errors.Is(err, ErrUnavailable) {
		t.Error("a too old engine must not read as no engine (tests would skip)")
	}

	host, _ = fakeEngine(t, "1.41", "20.10.24")
	t.Setenv("DOCKER_HOST", host)
	c, err := New(context.Background())
	if err != nil {
		t.Fatalf("API 1.41 refused: %v", err)
	}
	c.Close()

	t.Setenv("DOCKER_API_VERSION", "1.39")
	if _, err := New(context.Background()); err == nil || !strings.Contains(err.Error(), "DOCKER_API_VERSION") {
		t.Errorf("DOCKER_API_VERSION=1.39: got %v", err)
	}
}

func TestSSHEngineSaysWhatToDo(t *testing.T) {
	home := t.TempDir()
	writeContext(t, filepath.Join(home, ".docker"), "far", "ssh://me@far.example")
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONFIG", "")
	setHome(t, home)
	t.Setenv("DOCKER_CONTEXT", "far")
	if _, err := New(context.Background()); err == nil || !strings.Contains(err.Error(), "ssh") || !strings.Contains(err.Error(), "DOCKER_HOST=unix://") {
		t.Errorf("got %v", err)
	}
}

// fakeEngine answers /_ping and /version like an engine of the given API
// and product version, and returns its address: a unix socket in a temp
// dir, or on Windows, where the Docker client has no unix transport, a TCP
// port on the loopback.
func fakeEngine(t *testing.T, api, version string) (string, *int) {
	t.Helper()
	host, hits, _ := startFakeEngine(t, api, version)
	return host, hits
}

// serveFakeEngine is fakeEngine on a unix socket at the given path.
func serveFakeEngine(t *testing.T, sock, api, version string) *int {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	_, hits, _ := serveFake(t, l, api, version, "linux")
	return hits
}

func startFakeEngine(t *testing.T, api, version string) (string, *int, *httptest.Server) {
	t.Helper()
	return startFakeEngineOS(t, api, version, "linux")
}

// startFakeEngineOS is startFakeEngine for an engine of the given OSType.
func startFakeEngineOS(t *testing.T, api, version, osType string) (string, *int, *httptest.Server) {
	t.Helper()
	network, addr := "unix", filepath.Join(t.TempDir(), "docker.sock")
	if runtime.GOOS == "windows" {
		network, addr = "tcp", "127.0.0.1:0"
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, l, api, version, osType)
}

// serveFake serves the fake engine on l and returns its address.
func serveFake(t *testing.T, l net.Listener, api, version, osType string) (string, *int, *httptest.Server) {
	t.Helper()
	hits := new(int)
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		*hits++
		w.Header().Set("API-Version", api)
		w.Header().Set("OSType", osType)
		fmt.Fprint(w, "OK")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/version") {
			fmt.Fprintf(w, `{"Version":%q,"ApiVersion":%q,"MinAPIVersion":"1.12","Os":"linux"}`, version, api)
			return
		}
		http.NotFound(w, r)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	host := "unix://" + l.Addr().String()
	if l.Addr().Network() == "tcp" {
		host = "tcp://" + l.Addr().String()
	}
	return host, hits, srv
}

// setHome makes dir the user's home for the docker CLI's files, as each
// OS names it.
func setHome(t *testing.T, dir string) {
	t.Setenv("HOME", dir)
	t.Setenv("USERPROFILE", dir)
}
