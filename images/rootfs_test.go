package images

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

type fakeHost struct {
	files map[string]string
	tools []string
	user  string
}

func (h fakeHost) ReadFile(path string) ([]byte, error) {
	if s, ok := h.files[path]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

func (h fakeHost) LookPath(name string) (string, error) {
	if slices.Contains(h.tools, name) {
		return "/usr/bin/" + name, nil
	}
	return "", errors.New("not found")
}

func (h fakeHost) Username() string { return h.user }

func TestMmdebstrapMode(t *testing.T) {
	if args, err := mmdebstrapMode(0, fakeHost{}); err != nil || args != nil {
		t.Fatalf("root: %v, %v; want no mode arguments", args, err)
	}
	ready := fakeHost{
		files: map[string]string{"/etc/subuid": "dev:100000:65536\n", "/etc/subgid": "dev:100000:65536\n", "/proc/sys/user/max_user_namespaces": "63000\n"},
		tools: []string{"newuidmap", "newgidmap"},
		user:  "dev",
	}
	if args, err := mmdebstrapMode(1000, ready); err != nil || !slices.Equal(args, []string{"--mode=unshare"}) {
		t.Fatalf("non-root with what unshare mode needs: %v, %v", args, err)
	}
	bare := fakeHost{files: map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}, user: "dev"}
	_, err := mmdebstrapMode(1000, bare)
	if err == nil {
		t.Fatal("non-root without uidmap, subuids or user namespaces: no error")
	}
	for _, want := range []string{"newuidmap is missing", "/etc/subuid has no range for dev", "unprivileged_userns_clone is 0", "apt-get install uidmap", "usermod --add-subuids", "sudo -E", "image load"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
