package kindtest

import (
	"strings"
	"testing"
)

func TestContainerIDFromMountinfo(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	in := `1012 987 0:95 / / rw,relatime master:431 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
1021 1012 0:99 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw
1030 1012 254:1 /var/lib/docker/containers/` + id + `/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda1 rw
1031 1012 254:1 /var/lib/docker/containers/` + id + `/hostname /etc/hostname rw,relatime - ext4 /dev/vda1 rw
1033 1012 0:26 /docker.sock /var/run/docker.sock rw,nosuid - tmpfs tmpfs rw
`
	if got := containerIDFromMountinfo(strings.NewReader(in)); got != id {
		t.Errorf("got %q, want %q", got, id)
	}
	host := `22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
23 22 0:21 / /proc rw - proc proc rw
`
	if got := containerIDFromMountinfo(strings.NewReader(host)); got != "" {
		t.Errorf("outside a container: got %q", got)
	}
}

func TestRemoteAddress(t *testing.T) {
	for _, tc := range []struct {
		host   string
		ip     string
		remote bool
	}{
		{"unix:///var/run/docker.sock", "", false},
		{"tcp://127.0.0.1:2375", "", false},
		{"tcp://localhost:2375", "", false},
		{"tcp://[::1]:2375", "", false},
		{"tcp://10.251.0.2:2375", "10.251.0.2", true},
		{"https://192.0.2.7:2376", "192.0.2.7", true},
		{"npipe:////./pipe/docker_engine", "", false},
	} {
		ip, remote, err := remoteAddress(tc.host)
		if err != nil || ip != tc.ip || remote != tc.remote {
			t.Errorf("%s: got %q %v %v, want %q %v", tc.host, ip, remote, err, tc.ip, tc.remote)
		}
	}
	if _, _, err := remoteAddress("tcp://no-such-host.invalid:2375"); err == nil || !strings.Contains(err.Error(), "resolve") {
		t.Errorf("unresolvable host: got %v", err)
	}
}

func TestPlacementNetwork(t *testing.T) {
	for _, tc := range []struct {
		mode string
		ips  map[string]string
		want string
	}{
		{"default", map[string]string{"bridge": "172.17.0.5"}, "bridge"},
		{"bridge", map[string]string{"bridge": "172.17.0.5"}, "bridge"},
		{"ci-net", map[string]string{"ci-net": "10.0.0.5", "kt-1234": "172.20.0.9"}, "ci-net"},
		{"0123abcd", map[string]string{"ci-net": "10.0.0.5"}, "ci-net"},
	} {
		p := placement{kind: placementContainer}
		p.self.NetworkMode, p.self.IPs = tc.mode, tc.ips
		if got := p.network(); got != tc.want {
			t.Errorf("mode %s, networks %v: got %s, want %s", tc.mode, tc.ips, got, tc.want)
		}
	}
	remote := placement{kind: placementRemote, publishIP: "10.251.0.2"}
	if got := remote.certSANs(); len(got) != 1 || got[0] != "10.251.0.2" {
		t.Errorf("remote SANs %v", got)
	}
	if got := (placement{kind: placementLocal, publishIP: "127.0.0.1"}).certSANs(); got != nil {
		t.Errorf("local SANs %v", got)
	}
}
