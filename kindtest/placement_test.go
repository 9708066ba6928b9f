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
