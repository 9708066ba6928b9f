package kindtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kindtest/kindtest/internal/docker"
)

// sysctls is a rootlessHost whose sysctls are the map's.
func sysctls(m map[string]string) rootlessHost {
	return rootlessHost{sysctl: func(name string) (string, error) {
		v, ok := m[name]
		if !ok {
			return "", fmt.Errorf("no %s", name)
		}
		return v, nil
	}}
}

type recordLog struct{ lines []string }

func (r *recordLog) Printf(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

func TestCheckRootless(t *testing.T) {
	good := docker.EngineInfo{Rootless: true, CgroupVersion: "2", KernelVersion: "6.1.0-28-amd64",
		Controllers: []string{"cpu", "cpuset", "memory", "pids"}}
	roomy := sysctls(map[string]string{"net.ipv4.ip_unprivileged_port_start": "1024", "fs.inotify.max_user_instances": "512"})
	const engine = "unix:///run/user/1000/docker.sock"

	if err := checkRootless(docker.EngineInfo{CgroupVersion: "1", KernelVersion: "4.19.0"}, engine, []int{80}, roomy, nil); err != nil {
		t.Errorf("rootful engine: %v", err)
	}
	if err := checkRootless(good, engine, nil, roomy, nil); err != nil {
		t.Errorf("rootless engine with all it needs: %v", err)
	}

	for _, c := range []struct {
		name  string
		e     func(e docker.EngineInfo) docker.EngineInfo
		ports []int
		host  rootlessHost
		want  []string
	}{
		{"no delegation", func(e docker.EngineInfo) docker.EngineInfo { e.Controllers = []string{"memory", "pids"}; return e }, nil, roomy,
			[]string{engine, "lacks the cpu controller(s) (it has: memory, pids)", "/etc/systemd/system/user@.service.d/delegate.conf", "Delegate=cpu cpuset io memory pids", "systemctl daemon-reload", "systemctl --user restart docker"}},
		{"podman without delegation", func(e docker.EngineInfo) docker.EngineInfo {
			e.Podman, e.Controllers = true, []string{"memory", "pids"}
			return e
		}, nil, roomy,
			[]string{"lacks the cpu controller(s) (it has: memory, pids)", "Delegate=cpu cpuset io memory pids", "systemctl --user restart podman.socket podman.service"}},
		{"nothing delegated", func(e docker.EngineInfo) docker.EngineInfo { e.Controllers = nil; return e }, nil, roomy,
			[]string{"lacks the cpu, memory, pids controller(s) (it has: none)"}},
		{"cgroup v1", func(e docker.EngineInfo) docker.EngineInfo { e.CgroupVersion = "1"; return e }, nil, roomy,
			[]string{"runs cgroup v1", "systemd.unified_cgroup_hierarchy=1"}},
		{"old kernel", func(e docker.EngineInfo) docker.EngineInfo { e.KernelVersion = "5.10.0-30-amd64"; return e }, nil, roomy,
			[]string{"kernel 5.10.0-30-amd64", "overlayfs", "5.11"}},
		{"low port", func(e docker.EngineInfo) docker.EngineInfo { return e }, []int{8443, 80}, roomy,
			[]string{"host port 80", "ip_unprivileged_port_start=1024", "sysctl -w net.ipv4.ip_unprivileged_port_start=80"}},
	} {
		err := checkRootless(c.e(good), engine, c.ports, c.host, nil)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error lacks %q:\n%v", c.name, w, err)
			}
		}
	}

	// Low ports the host allows, and a remote engine whose sysctls are
	// out of reach, pass.
	open := sysctls(map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "fs.inotify.max_user_instances": "8192"})
	if err := checkRootless(good, engine, []int{80}, open, nil); err != nil {
		t.Errorf("port 80 with ip_unprivileged_port_start=0: %v", err)
	}
	if err := checkRootless(good, engine, []int{80}, rootlessHost{}, nil); err != nil {
		t.Errorf("remote engine: %v", err)
	}

	// A low inotify limit is a warning, not an error.
	var log recordLog
	low := sysctls(map[string]string{"net.ipv4.ip_unprivileged_port_start": "1024", "fs.inotify.max_user_instances": "128"})
	if err := checkRootless(good, engine, nil, low, &log); err != nil {
		t.Errorf("inotify 128: %v", err)
	}
	if len(log.lines) != 1 || !strings.Contains(log.lines[0], "fs.inotify.max_user_instances=512") {
		t.Errorf("inotify warning: %q", log.lines)
	}

	// vfs storage works, slowly: a warning naming the fix of each engine.
	for _, podman := range []bool{false, true} {
		var log recordLog
		e := good
		e.Driver, e.Podman = "vfs", podman
		if err := checkRootless(e, engine, nil, roomy, &log); err != nil {
			t.Errorf("vfs: %v", err)
		}
		want := "storage-driver\": \"overlay2\""
		if podman {
			want = `driver = "overlay"\n' > ~/.config/containers/storage.conf`
		}
		if len(log.lines) != 1 || !strings.Contains(log.lines[0], "vfs driver") || !strings.Contains(log.lines[0], want) {
			t.Errorf("vfs warning (podman %v): %q, want one naming %q", podman, log.lines, want)
		}
	}
	log.lines = nil
	e := good
	e.Driver = "overlay"
	if err := checkRootless(e, engine, nil, roomy, &log); err != nil || len(log.lines) != 0 {
		t.Errorf("overlay: %v, warnings %q", err, log.lines)
	}
}

func TestKernelRelease(t *testing.T) {
	for r, want := range map[string][2]int{"6.1.0-28-amd64": {6, 1}, "5.11-rc1": {5, 11}, "4.19.0": {4, 19}, "6.18.44": {6, 18}} {
		major, minor, ok := kernelRelease(r)
		if !ok || major != want[0] || minor != want[1] {
			t.Errorf("kernelRelease(%q) = %d %d %v", r, major, minor, ok)
		}
	}
	if _, _, ok := kernelRelease("unknown"); ok {
		t.Error("parsed unknown")
	}
}

// TestRootlessKubeProxyConfig: on a rootless engine kube-proxy is told to
// leave the conntrack TCP timeouts alone, elsewhere the config is as it
// was.
func TestRootlessKubeProxyConfig(t *testing.T) {
	cp := &Node{name: "c-control-plane", ip: "172.18.0.2", role: RoleControlPlane}
	p := initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", timeout: time.Minute, settings: &settings{}}
	rootful := kubeadmInitConfig(p)
	if strings.Contains(rootful, "tcpEstablishedTimeout") {
		t.Errorf("rootful: conntrack timeouts set:\n%s", rootful)
	}
	if !strings.Contains(rootful, "  maxPerCore: 0\niptables:\n") {
		t.Errorf("rootful: kube-proxy's conntrack section changed:\n%s", rootful)
	}
	p.rootless = true
	rl := kubeadmInitConfig(p)
	if !strings.Contains(rl, "  maxPerCore: 0\n") || !strings.Contains(rl, "  tcpEstablishedTimeout: 0s\n  tcpCloseWaitTimeout: 0s\niptables:\n") {
		t.Errorf("rootless: conntrack section:\n%s", rl)
	}
	var doc map[string]any
	for _, d := range strings.Split(rl, "\n---\n") {
		if !strings.Contains(d, "KubeProxyConfiguration") {
			continue
		}
		if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
			t.Fatalf("kube-proxy document: %v\n%s", err, d)
		}
	}
	ct, _ := doc["conntrack"].(map[string]any)
	if ct["tcpEstablishedTimeout"] != "0s" || ct["tcpCloseWaitTimeout"] != "0s" {
		t.Errorf("kube-proxy conntrack %v", doc["conntrack"])
	}
}
