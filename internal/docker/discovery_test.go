package docker

import (
	"context"
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

// TestDefaultSocketPerOS: with no DOCKER_HOST and no docker context, the
// engine is the first socket found where the usual engines put theirs, in
// an order that depends on the OS; on Windows it is the named pipe.
func TestDefaultSocketPerOS(t *testing.T) {
	const home = "/Users/Jane Doe" // a home with a space, as macOS allows
	desktop := home + "/.docker/run/docker.sock"
	colima := home + "/.colima/default/docker.sock"
	system := "/var/run/docker.sock"
	for _, tc := range []struct {
		name     string
		goos     string
		sockets  []string
		wantHost string
		wantSrc  string
	}{
		{"macOS, Docker Desktop", "darwin", []string{desktop}, "unix://" + desktop, "Docker Desktop"},
		{"macOS, Docker Desktop before /var/run/docker.sock", "darwin", []string{system, desktop}, "unix://" + desktop, "Docker Desktop"},
		{"macOS, colima", "darwin", []string{colima}, "unix://" + colima, "colima"},
		{"macOS, Docker Desktop before colima", "darwin", []string{colima, desktop}, "unix://" + desktop, "Docker Desktop"},
		{"macOS, the default socket only", "darwin", []string{system}, "unix://" + system, "default socket"},
		{"Linux, the host's dockerd first", "linux", []string{desktop, system}, "unix://" + system, "default socket"},
		{"Linux, Docker Desktop's socket", "linux", []string{home + "/.docker/desktop/docker.sock"}, "unix://" + home + "/.docker/desktop/docker.sock", "Docker Desktop"},
		{"Windows, the named pipe", "windows", nil, "npipe:////./pipe/docker_engine", "named pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := resolveEndpoint(onHost(tc.goos, map[string]string{"HOME": home, "USERPROFILE": home, "DOCKER_CONFIG": t.TempDir()}, tc.sockets...))
			if err != nil {
				t.Fatal(err)
			}
			if ep.Host != tc.wantHost || !strings.Contains(ep.Source, tc.wantSrc) {
				t.Errorf("got %q from %q, want %q from %q", ep.Host, ep.Source, tc.wantHost, tc.wantSrc)
			}
		})
	}
}

func TestNoSocketSaysWhereItLooked(t *testing.T) {
	const home = "/Users/jane"
	_, err := resolveEndpoint(onHost("darwin", map[string]string{"HOME": home}))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable (tests skip, or fail under CI)", err)
	}
	for _, want := range []string{home + "/.docker/run/docker.sock", home + "/.colima/default/docker.sock", "/var/run/docker.sock", "DOCKER_HOST", "start Docker Desktop"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestDesktopContexts: the contexts Docker Desktop makes current,
// desktop-linux on macOS (a socket in the home) and on Windows (a pipe of
// its own), are read from the CLI's context store in the user's home:
// HOME on macOS, USERPROFILE on Windows.
func TestDesktopContexts(t *testing.T) {
	for _, tc := range []struct {
		goos, homeVar, host string
	}{
		{"darwin", "HOME", "unix:///Users/jane/.docker/run/docker.sock"},
		{"windows", "USERPROFILE", "npipe:////./pipe/dockerDesktopLinuxEngine"},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "Jane Doe")
			cfg := filepath.Join(home, ".docker")
			writeContext(t, cfg, "desktop-linux", tc.host)
			if err := os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"currentContext":"desktop-linux"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			ep, err := resolveEndpoint(onHost(tc.goos, map[string]string{tc.homeVar: home}))
			if err != nil {
				t.Fatal(err)
			}
			if ep.Host != tc.host || !strings.Contains(ep.Source, `"desktop-linux"`) {
				t.Errorf("got %q from %q, want %q from the desktop-linux context", ep.Host, ep.Source, tc.host)
			}
		})
	}
}

// TestFoundSocketUnderASpacedHome connects to an engine (a fake one: pure
// logic, no Docker) found at Docker Desktop's socket under a home
// directory whose name has a space.
func TestFoundSocketUnderASpacedHome(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the Docker client has no unix socket transport on Windows")
	}
	home := filepath.Join(t.TempDir(), "J D")
	sock := filepath.Join(home, ".docker", "run", "docker.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	hits := serveFakeEngine(t, sock, "1.45", "26.1.5")
	t.Setenv("DOCKER_API_VERSION", "")
	h := thisHost()
	h.getenv = env(map[string]string{"HOME": home})
	h.goos = "darwin" // where Docker Desktop's socket comes first
	ep, err := resolveEndpoint(h)
	if err != nil {
		t.Fatal(err)
	}
	c, err := connect(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if *hits == 0 || c.Host() != "unix://"+sock || !strings.Contains(c.Source(), "Docker Desktop") {
		t.Errorf("hits %d, host %s, source %s", *hits, c.Host(), c.Source())
	}
}

func TestMountableSocket(t *testing.T) {
	for _, tc := range []struct {
		host, goos, engineOS, want string
	}{
		{"unix:///var/run/docker.sock", "linux", "Debian GNU/Linux 12 (bookworm)", "/var/run/docker.sock"},
		// Rootless dockerd sees the host's paths: mount what is dialled.
		{"unix:///run/user/1000/docker.sock", "linux", "Ubuntu 24.04 LTS", "/run/user/1000/docker.sock"},
		// Docker Desktop for Linux runs its engine in a VM.
		{"unix:///home/jane/.docker/desktop/docker.sock", "linux", "Docker Desktop", "/var/run/docker.sock"},
		{"unix:///Users/Jane Doe/.docker/run/docker.sock", "darwin", "Docker Desktop", "/var/run/docker.sock"},
		{"unix:///Users/jane/.colima/default/docker.sock", "darwin", "Ubuntu 24.04 LTS", "/var/run/docker.sock"},
		{"npipe:////./pipe/dockerDesktopLinuxEngine", "windows", "Docker Desktop", "/var/run/docker.sock"},
		// A remote engine's socket path cannot be known: the usual one.
		{"tcp://10.0.0.2:2375", "linux", "", "/var/run/docker.sock"},
	} {
		if got := mountableSocket(tc.host, tc.goos, tc.engineOS); got != tc.want {
			t.Errorf("mountableSocket(%q, %s, %q) = %q, want %q", tc.host, tc.goos, tc.engineOS, got, tc.want)
		}
	}
}

// TestWindowsContainersEngineRefused: an engine in Windows-containers mode
// cannot run a node; New says so, and how to switch, before anything is
// created.
func TestWindowsContainersEngineRefused(t *testing.T) {
	host, _, _ := startFakeEngineOS(t, "1.45", "26.1.5", "windows")
	_, err := NewHost(context.Background(), host)
	if err == nil || !strings.Contains(err.Error(), "Windows containers") || !strings.Contains(err.Error(), "switch Docker Desktop to Linux containers") {
		t.Fatalf("got %v, want a refusal saying how to switch", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Error("an engine in Windows-containers mode must not read as no engine (tests would skip)")
	}
}

// TestMountableSocketAsksTheEngine: which socket a container mounts comes
// from the engine's own account of itself (a fake engine: pure logic).
func TestMountableSocketAsksTheEngine(t *testing.T) {
	for _, engineOS := range []string{"Debian GNU/Linux 12 (bookworm)", "Docker Desktop"} {
		t.Run(engineOS, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("API-Version", "1.45")
				w.Header().Set("OSType", "linux")
			})
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/info") {
					fmt.Fprintf(w, `{"OperatingSystem":%q,"OSType":"linux"}`, engineOS)
					return
				}
				http.NotFound(w, r)
			})
			network, addr := "unix", filepath.Join(t.TempDir(), "docker.sock")
			if runtime.GOOS == "windows" {
				network, addr = "tcp", "127.0.0.1:0"
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(mux)
			srv.Listener = l
			srv.Start()
			t.Cleanup(srv.Close)
			host := network + "://" + l.Addr().String()
			c, err := NewHost(context.Background(), host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want := "/var/run/docker.sock"
			if runtime.GOOS == "linux" && engineOS != "Docker Desktop" {
				want = addr // a local Linux engine: the path dialled
			}
			if got := c.MountableSocket(context.Background()); got != want {
				t.Errorf("engine %q at %s: mount %q, want %q", engineOS, host, got, want)
			}
		})
	}
}
