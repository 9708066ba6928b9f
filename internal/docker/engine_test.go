package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Version responses: podman 5.4.2 of Debian trixie and 4.3.1 of bookworm
// as they answered in the engine matrix (trimmed); a podman 3.4 and
// Docker 26.1.5 written in the same layout (podman 3 reported API 1.40).
const (
	podman5Version  = `{"Platform":{"Name":"linux/amd64/debian-13"},"Components":[{"Name":"Podman Engine","Version":"5.4.2","Details":{"APIVersion":"5.4.2","MinAPIVersion":"4.0.0"}},{"Name":"Conmon","Version":"conmon version 2.1.12, commit: unknown"},{"Name":"OCI Runtime (crun)","Version":"crun version 1.21"}],"Version":"5.4.2","ApiVersion":"1.41","MinAPIVersion":"1.24","Os":"linux","Arch":"amd64"}`
	podman4Version  = `{"Platform":{"Name":"linux/amd64/debian-12"},"Components":[{"Name":"Podman Engine","Version":"4.3.1","Details":{"APIVersion":"4.3.1","MinAPIVersion":"4.0.0"}}],"Version":"4.3.1","ApiVersion":"1.41","MinAPIVersion":"1.24","Os":"linux"}`
	podman3Version  = `{"Platform":{"Name":"linux/amd64/ubuntu-22.04"},"Components":[{"Name":"Podman Engine","Version":"3.4.4"}],"Version":"3.4.4","ApiVersion":"1.40","MinAPIVersion":"1.24","Os":"linux"}`
	docker26Version = `{"Platform":{"Name":""},"Components":[{"Name":"Engine","Version":"26.1.5+dfsg1"},{"Name":"containerd","Version":"1.7.24~ds1"},{"Name":"runc","Version":"1.1.15"},{"Name":"docker-init","Version":"0.19.0"}],"Version":"26.1.5+dfsg1","ApiVersion":"1.45","MinAPIVersion":"1.24","Os":"linux"}`
)

func TestEngineOf(t *testing.T) {
	for _, tc := range []struct {
		response string
		podman   bool
		name     string
	}{
		{podman5Version, true, "Podman 5.4.2"},
		{podman4Version, true, "Podman 4.3.1"},
		{docker26Version, false, "Docker 26.1.5+dfsg1"},
		{`{"Platform":{"Name":"Docker Engine - Community"},"Version":"29.1.0"}`, false, "Docker 29.1.0"},
		{`{}`, false, "Docker"},
	} {
		var v types.Version
		if err := json.Unmarshal([]byte(tc.response), &v); err != nil {
			t.Fatal(err)
		}
		e := engineOf(v)
		if e.podman != tc.podman || e.String() != tc.name {
			t.Errorf("engineOf(%s) = %v (podman %v), want %s (podman %v)", tc.response, e, e.podman, tc.name, tc.podman)
		}
	}
}

func TestPodmanTooOld(t *testing.T) {
	for v, ok := range map[string]bool{"4.3.1": true, "4.3.0": true, "5.4.2": true, "4.2.0": false, "4.0.0-dev": false, "3.4.4": false} {
		err := engine{podman: true, version: v}.check("unix:///run/podman/podman.sock")
		if (err == nil) != ok {
			t.Errorf("podman %s: %v, want ok %v", v, err, ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "Podman "+v) || !strings.Contains(err.Error(), "upgrade podman")) {
			t.Errorf("podman %s: the error does not name the engine and what to do: %v", v, err)
		}
	}
	if err := (engine{version: "20.10.24"}).check("x"); err != nil {
		t.Errorf("Docker refused as a podman: %v", err)
	}
}

// TestConnectPodman: a podman too old for kindtest is refused at connect,
// by its version, whatever the API version it reports; its API version's
// refusal names podman.
func TestConnectPodman(t *testing.T) {
	for _, tc := range []struct {
		api, response, want string
	}{
		{"1.41", podman5Version, ""},
		{"1.41", podman4Version, ""},
		{"1.41", strings.ReplaceAll(podman4Version, "4.3.1", "4.2.0"), "is Podman 4.2.0; kindtest needs podman 4.3.0 or newer"},
		{"1.40", podman3Version, "is Podman 3.4.4 with API 1.40; kindtest needs API 1.41 (podman 4.3.0) or newer"},
	} {
		host := fakeVersionEngine(t, tc.api, tc.response)
		c, err := NewHost(context.Background(), host)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.response, err)
				continue
			}
			if !c.Podman() {
				t.Errorf("%s: not detected as podman", tc.response)
			}
			c.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error with %q", err, tc.want)
		}
	}
}

// fakeVersionEngine answers ping with api and /version with response.
func fakeVersionEngine(t *testing.T, api, response string) string {
	t.Helper()
	return fakeAPIEngine(t, api, map[string]string{"/version": response}, http.NotFound)
}

func TestCreatedName(t *testing.T) {
	for _, tc := range []struct {
		m    events.Message
		want string
	}{
		// Docker's
		{events.Message{Type: events.VolumeEventType, Actor: events.Actor{ID: "kt-a-var", Attributes: map[string]string{"driver": "local"}}}, "kt-a-var"},
		{events.Message{Type: events.NetworkEventType, Actor: events.Actor{ID: "c3de2a8e", Attributes: map[string]string{"name": "kt-a", "type": "bridge"}}}, "kt-a"},
		{events.Message{Type: events.ContainerEventType, Actor: events.Actor{ID: "a2ac53f7", Attributes: map[string]string{"name": "kt-a-cp"}}}, "kt-a-cp"},
		// podman 5.4's
		{events.Message{Type: events.VolumeEventType, Actor: events.Actor{Attributes: map[string]string{"name": "kt-a-var", "image": ""}}}, "kt-a-var"},
		{events.Message{Type: events.NetworkEventType, Actor: events.Actor{ID: "c3de2a8e", Attributes: map[string]string{"driver": "bridge", "name": "", "network": "kt-a"}}}, "kt-a"},
		{events.Message{Type: events.ContainerEventType, Actor: events.Actor{ID: "a2ac53f7", Attributes: map[string]string{"name": "kt-a-cp", "podId": ""}}}, "kt-a-cp"},
	} {
		if got := createdName(tc.m); got != tc.want {
			t.Errorf("createdName(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

func TestPodmanNetworkMode(t *testing.T) {
	one := map[string]*network.EndpointSettings{"kt-a": {IPAddress: "10.89.1.2"}}
	two := map[string]*network.EndpointSettings{"kt-a": {}, "kt-b": {}}
	for _, tc := range []struct {
		mode     string
		networks map[string]*network.EndpointSettings
		want     string
	}{
		{"bridge", one, "kt-a"},
		{"bridge", two, "bridge"},
		{"none", nil, "none"},
		{"host", nil, "host"},
		{"container:abc", nil, "container:abc"},
	} {
		if got := podmanNetworkMode(tc.mode, tc.networks); got != tc.want {
			t.Errorf("podmanNetworkMode(%q, %d networks) = %q, want %q", tc.mode, len(tc.networks), got, tc.want)
		}
	}
}

func TestLoadedName(t *testing.T) {
	var podman5, docker26 types.Version
	json.Unmarshal([]byte(podman5Version), &podman5)
	json.Unmarshal([]byte(docker26Version), &docker26)
	for _, tc := range []struct {
		v          types.Version
		said, want string
	}{
		{podman5, "localhost/kindtest/node:v1.37.2", "kindtest/node:v1.37.2"},
		{podman5, "registry.example/kindtest/node:v1", "registry.example/kindtest/node:v1"},
		{docker26, "kindtest/node:v1.37.2", "kindtest/node:v1.37.2"},
		{docker26, "localhost/kindtest/node:v1", "localhost/kindtest/node:v1"},
	} {
		if got := engineOf(tc.v).loadedName(tc.said); got != tc.want {
			t.Errorf("%s says it loaded %s: %s, want %s", engineOf(tc.v).version, tc.said, got, tc.want)
		}
	}
}

// podman4RootlessInfo is the Docker-compatible info of a rootless podman
// 4.3.1 on cgroup v2 as the guest's `docker info` showed it (trimmed):
// no "rootless" among its security options, and the limits its source
// fills from cgroup v1's file names: no cpu, no cpuset.
const podman4RootlessInfo = `{"ServerVersion":"4.3.1","CgroupVersion":"2","CgroupDriver":"systemd","KernelVersion":"6.1.0-57-amd64","OperatingSystem":"debian","Architecture":"amd64",` +
	`"CPUShares":false,"CpuCfsQuota":false,"CPUSet":false,"MemoryLimit":true,"PidsLimit":true,` +
	`"SecurityOptions":["name=apparmor","name=seccomp,profile=default"],"Rootless":true}`

// TestPodmanInfo: podman's libpod info says whether it is rootless and,
// on cgroup v2, which controllers it has; its Docker-compatible info says
// neither. Docker's come from its own info, without the libpod API.
func TestPodmanInfo(t *testing.T) {
	const rootless = `"security":{"rootless":true}`
	for _, tc := range []struct {
		name, version, info, libpod string
		rootless                    bool
		want                        string // controllers, or the error's text after "error: "
	}{
		{"rootless podman, all delegated", podman4Version, podman4RootlessInfo,
			`{"host":{"cgroupControllers":["cpuset","cpu","io","memory","pids"],"cgroupVersion":"v2",` + rootless + `}}`, true, "cpu cpuset memory pids"},
		{"rootless podman, memory and pids", podman4Version, podman4RootlessInfo,
			`{"host":{"cgroupControllers":["memory","pids"],"cgroupVersion":"v2",` + rootless + `}}`, true, "memory pids"},
		{"rootful podman", podman4Version, podman4RootlessInfo,
			`{"host":{"cgroupControllers":["cpuset","cpu","io","memory","hugetlb","pids"],"security":{"rootless":false}}}`, false, "cpu cpuset memory pids"},
		{"libpod info fails", podman4Version, podman4RootlessInfo, "", false, "error: engine info: podman's libpod info: 404 Not Found"},
		{"podman on cgroup v1 keeps its compatible limits", podman4Version,
			strings.Replace(podman4RootlessInfo, `"CgroupVersion":"2"`, `"CgroupVersion":"1"`, 1), `{"host":{` + rootless + `}}`, true, "memory pids"},
		{"rootless Docker", docker26Version,
			`{"CgroupVersion":"2","CPUShares":true,"CpuCfsQuota":true,"CPUSet":true,"MemoryLimit":true,"PidsLimit":true,"SecurityOptions":["name=rootless"]}`,
			`{"host":{"cgroupControllers":[]}}`, true, "cpu cpuset memory pids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var libpodAsked bool
			host := fakeAPIEngine(t, "1.41", map[string]string{"/version": tc.version, "/info": tc.info},
				func(w http.ResponseWriter, r *http.Request) {
					libpodAsked = true
					if r.URL.Path != "/v4.0.0/libpod/info" || tc.libpod == "" {
						http.NotFound(w, r)
						return
					}
					fmt.Fprint(w, tc.libpod)
				})
			c, err := NewHost(context.Background(), host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, err := c.Info(context.Background())
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Info: %v, want an error with %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(info.Controllers, " "); got != tc.want {
				t.Errorf("controllers %q, want %q", got, tc.want)
			}
			if info.Rootless != tc.rootless || info.Podman != c.Podman() {
				t.Errorf("rootless %v podman %v, want rootless %v podman %v", info.Rootless, info.Podman, tc.rootless, c.Podman())
			}
			if libpodAsked != c.Podman() {
				t.Errorf("libpod API asked: %v (podman %v)", libpodAsked, c.Podman())
			}
		})
	}
}

func TestLibpodURL(t *testing.T) {
	for host, want := range map[string]string{
		"unix:///run/user/1000/podman/podman.sock": "http://" + client.DummyHost + "/v4.0.0/libpod/info",
		"tcp://10.0.0.2:2375":                      "http://10.0.0.2:2375/v4.0.0/libpod/info",
	} {
		api, err := client.NewClientWithOpts(client.WithHost(host))
		if err != nil {
			t.Fatal(err)
		}
		c := &Client{api: api}
		if got, err := c.libpodURL("/info"); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", host, got, err, want)
		}
		api.Close()
	}
}

// fakeAPIEngine answers ping with api, the API's paths (after whatever
// version prefix) with the bodies given, and anything else with other.
func fakeAPIEngine(t *testing.T, api string, bodies map[string]string, other http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", api)
		w.Header().Set("OSType", "linux")
		fmt.Fprint(w, "OK")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if rest, ok := strings.CutPrefix(path, "/v"); ok && strings.Contains(rest, "/") {
			path = rest[strings.Index(rest, "/"):]
		}
		if body, ok := bodies[path]; ok {
			fmt.Fprint(w, body)
			return
		}
		other(w, r)
	})
	return serveUnix(t, mux)
}

// serveUnix serves h on a Unix socket of the test's own until the test
// ends, and returns the socket's address as an engine host.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix://" + sock
}
