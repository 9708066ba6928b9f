package kindtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestUnitPortMappingOption(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want []string // substrings of the error; none: valid
	}{
		{"nodeport", []Option{WithPortMapping(0, 30080)}, nil},
		{"fixed host port and 80", []Option{WithPortMapping(8080, 80), WithPortMapping(0, 443)}, nil},
		{"node port out of range", []Option{WithPortMapping(0, 0), WithPortMapping(0, 70000)}, []string{"node port 0 is out of range", "node port 70000 is out of range"}},
		{"host port out of range", []Option{WithPortMapping(-1, 30080), WithPortMapping(65536, 30081)}, []string{"host port -1", "host port 65536"}},
		{"api server port", []Option{WithPortMapping(0, 6443)}, []string{"6443 is the API server's"}},
		{"duplicate node port", []Option{WithPortMapping(0, 30080), WithPortMapping(0, 30080)}, []string{"node port 30080 is mapped twice"}},
		{"duplicate host port", []Option{WithPortMapping(9000, 30080), WithPortMapping(9000, 30081)}, []string{"host port 9000 is used twice"}},
		{"reported with other errors", []Option{WithWorkers(-1), WithPortMapping(0, 6443)}, []string{"workers", "6443"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newConfig(tc.opts)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestUnitPortMappingReuseHash(t *testing.T) {
	plain, _ := newConfig(nil)
	mapped, _ := newConfig([]Option{WithPortMapping(0, 30080)})
	if reuseHash(plain, "sha256:x") == reuseHash(mapped, "sha256:x") {
		t.Error("a cluster with a port mapping must not be reused for one without")
	}
}

func TestUnitMappedAddr(t *testing.T) {
	c := &Cluster{identity: identity{name: "kt-x", nodes: []*Node{{name: "kt-x-control-plane", ip: "172.18.0.2"}}},
		access: access{ports: map[string]string{"6443/tcp": "127.0.0.1:40001", "30080/tcp": "127.0.0.1:40002"}}}
	c.place = placement{kind: placementLocal}
	if got, err := c.MappedAddr(30080); err != nil || got != "127.0.0.1:40002" {
		t.Errorf("local: %q %v", got, err)
	}
	c.place = placement{kind: placementContainer}
	if got, err := c.MappedAddr(30080); err != nil || got != "172.18.0.2:30080" {
		t.Errorf("in container: %q %v", got, err)
	}
	for _, p := range []int{30081, 6443} {
		if _, err := c.MappedAddr(p); err == nil || !strings.Contains(err.Error(), "WithPortMapping(0, ") {
			t.Errorf("MappedAddr(%d): %v, want an error naming WithPortMapping", p, err)
		}
	}
}

func TestUnitNamespaceName(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	seen := map[string]bool{}
	for _, test := range []string{
		"TestAccess/namespaces/3",
		"TestX",
		"",
		"///",
		"[It] Ginkgo spec: makes a Pod (with spaces) & symbols!",
		strings.Repeat("TestVeryLongName/", 20) + "leaf_42",
	} {
		for range 50 {
			n := namespaceName(test)
			if len(n) > 63 || !label.MatchString(n) {
				t.Fatalf("namespaceName(%q) = %q: not a DNS label of at most 63 characters", test, n)
			}
			if seen[n] {
				t.Fatalf("namespaceName(%q) = %q twice", test, n)
			}
			seen[n] = true
		}
	}
	if n := namespaceName("TestAccess/namespaces/3"); !strings.HasPrefix(n, "testaccess-namespaces-3-") {
		t.Errorf("got %q, want it derived from the test name", n)
	}
	if n := namespaceName(strings.Repeat("a/", 40) + "leaf"); !strings.Contains(n, "-leaf-") {
		t.Errorf("got %q: a long name must keep its end, where the subtest is", n)
	}
}

func TestUnitParseTarget(t *testing.T) {
	for _, tc := range []struct{ in, kind, name string }{
		{"pod/web", "pod", "web"},
		{"svc/web", "svc", "web"},
		{"Service/web", "service", "web"},
		{"deployment/web-1", "deployment", "web-1"},
	} {
		kind, name, err := parseTarget(tc.in)
		if err != nil || kind != tc.kind || name != tc.name {
			t.Errorf("parseTarget(%q) = %q %q %v", tc.in, kind, name, err)
		}
	}
	for _, bad := range []string{"", "web", "pod/", "/web", "pod/a/b"} {
		if _, _, err := parseTarget(bad); err == nil {
			t.Errorf("parseTarget(%q): no error", bad)
		}
	}
}

// closedCluster is a handle whose cluster is gone; nothing may reach out.
func closedCluster() *Cluster {
	c := &Cluster{cfg: defaultConfig(), identity: identity{name: "kt-gone", nodes: []*Node{{name: "kt-gone-control-plane", id: "x"}}}}
	c.life.closed.Store(true)
	return c
}

func TestUnitAccessAfterDelete(t *testing.T) {
	c := closedCluster()
	ctx := context.Background()
	if _, _, err := c.PortForward(ctx, "default", "pod/x", 80); err == nil || !strings.Contains(err.Error(), "was deleted") {
		t.Errorf("PortForward: %v", err)
	}
	if err := c.Wait(ctx, "default", "pod/x", Ready); err == nil || !strings.Contains(err.Error(), "was deleted") {
		t.Errorf("Wait: %v", err)
	}
}

func TestUnitBadArguments(t *testing.T) {
	c := &Cluster{cfg: defaultConfig(), identity: identity{name: "kt-x"}}
	ctx := context.Background()
	for _, tc := range []struct {
		target string
		port   int
		want   string
	}{
		{"configmap/x", 80, "cannot be forwarded to"},
		{"x", 80, "want KIND/NAME"},
		{"pod/x", 0, "out of range"},
		{"pod/x", 65536, "out of range"},
	} {
		if _, _, err := c.PortForward(ctx, "default", tc.target, tc.port); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PortForward(%s, %d): %v, want %q", tc.target, tc.port, err, tc.want)
		}
	}
	if err := c.Wait(ctx, "default", "pod/x", Condition("Happy")); err == nil || !strings.Contains(err.Error(), "unknown condition") {
		t.Errorf("Wait with an unknown condition: %v", err)
	}
	noKube := &Cluster{cfg: defaultConfig(), identity: identity{name: "kt-x"}}
	noKube.cfg.kubernetes = false
	if err := noKube.Wait(ctx, "default", "pod/x", Ready); err == nil || !strings.Contains(err.Error(), "WithoutKubernetes") {
		t.Errorf("Wait WithoutKubernetes: %v", err)
	}
}

func TestUnitOwnNodes(t *testing.T) {
	a, b := &Node{name: "kt-a-control-plane", id: "1"}, &Node{name: "kt-a-worker", id: "2"}
	c := &Cluster{identity: identity{name: "kt-a", nodes: []*Node{a, b}}}
	// A handle from Attach has its own Node values for the same nodes.
	got, err := c.ownNodes([]*Node{{name: "kt-a-worker", id: "2"}, b})
	if err != nil || len(got) != 1 || got[0] != b {
		t.Errorf("ownNodes: %v %v, want the worker once", got, err)
	}
	if _, err := c.ownNodes([]*Node{{name: "kt-b-worker", id: "3"}}); err == nil || !strings.Contains(err.Error(), "not a node of cluster kt-a") {
		t.Errorf("a node of another cluster: %v", err)
	}
	if _, err := c.ownNodes(nil); err == nil {
		t.Error("no node: no error")
	}
	if _, err := c.ownNodes([]*Node{nil}); err == nil {
		t.Error("a nil node: no error")
	}
	if err := c.LoadImageOn(context.Background(), []*Node{{name: "kt-b-worker", id: "3"}}, "busybox"); err == nil || !strings.Contains(err.Error(), "not a node of cluster") {
		t.Errorf("LoadImageOn a foreign node: %v", err)
	}
}

func TestUnitContainerdRef(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                     "docker.io/library/busybox:latest",
		"kindtest/echo:dev":           "docker.io/kindtest/echo:dev",
		"localhost:5000/a/b":          "localhost:5000/a/b:latest",
		"registry.example.com/x:1.2":  "registry.example.com/x:1.2",
		"registry.example.com:443/x":  "registry.example.com:443/x:latest",
		"sha256:0123":                 "",
		"busybox@sha256:0123456789ab": "",
	} {
		if got := containerdRef(in); got != want {
			t.Errorf("containerdRef(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnitNamedInArchive: the name the engine's archive gives an image,
// where it is not the one asked for: podman files an image loaded from a
// `docker save` archive under localhost/ and saves it so.
func TestUnitNamedInArchive(t *testing.T) {
	for _, c := range []struct {
		ref      string
		tags     []string
		id       string
		archived string
	}{
		{"kindtest/echo:dev", []string{"kindtest/echo:dev"}, "sha256:aa", ""},
		{"kindtest/echo:dev", []string{"docker.io/kindtest/echo:dev"}, "sha256:aa", ""},
		{"kindtest/echo:dev", []string{"localhost/kindtest/echo:dev"}, "sha256:aa", "localhost/kindtest/echo:dev"},
		{"busybox", []string{"localhost/busybox:latest"}, "sha256:aa", "localhost/busybox:latest"},
		// Its own name wins, whatever the order.
		{"kindtest/echo:dev", []string{"localhost/kindtest/echo:dev", "docker.io/kindtest/echo:dev"}, "sha256:aa", ""},
		{"kindtest/echo:dev", []string{"docker.io/kindtest/echo:dev", "localhost/kindtest/echo:dev"}, "sha256:aa", ""},
		// Another image's name, or a reference with a registry, is not it.
		{"kindtest/echo:dev", []string{"kindtest/echo:old", "localhost/other/echo:dev"}, "", ""},
		{"registry.example.com/x:1", []string{"localhost/registry.example.com/x:1"}, "", ""},
		{"sha256:0123", []string{"kindtest/echo:dev"}, "", ""},
	} {
		got := namedInArchive(c.ref, "sha256:aa", c.tags)
		if got.ref != c.ref || got.id != c.id || got.archived != c.archived {
			t.Errorf("namedInArchive(%q, %q) = id %q archived %q, want id %q archived %q", c.ref, c.tags, got.id, got.archived, c.id, c.archived)
		}
	}
	cmd := importCommand("linux/amd64", []archiveImage{namedInArchive("kindtest/echo:dev", "sha256:aa", []string{"localhost/kindtest/echo:dev"})})
	if want := []string{"localhost/kindtest/echo:dev", "docker.io/kindtest/echo:dev", imageIDLabel + "=sha256:aa"}; !slices.Equal(cmd[len(cmd)-3:], want) {
		t.Errorf("import command ends %q, want %q", cmd[len(cmd)-3:], want)
	}
}

func TestUnitImageFilter(t *testing.T) {
	got := imageFilter("docker.io/kindtest/echo:dev", "sha256:bb")
	want := `name=="docker.io/kindtest/echo:dev",labels."dev.kindtest.image-id"=="sha256:bb"`
	if got != want {
		t.Errorf("imageFilter = %s, want %s", got, want)
	}
}

func TestUnitScanArchive(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, gz bool, files map[string]string) string {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for n, body := range files {
			_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body))})
			_, _ = tw.Write([]byte(body))
		}
		_ = tw.Close()
		data := buf.Bytes()
		if gz {
			var z bytes.Buffer
			w := gzip.NewWriter(&z)
			_, _ = w.Write(data)
			_ = w.Close()
			data = z.Bytes()
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	id := strings.Repeat("ab", 32)
	manifest := `[{"Config":"blobs/sha256/` + id + `","RepoTags":["kindtest/echo:dev","kindtest/echo:v2"],"Layers":[]},{"Config":"` + id + `.json","RepoTags":null}]`
	for _, gz := range []bool{false, true} {
		p := write("a.tar", gz, map[string]string{"manifest.json": manifest, "oci-layout": "{}"})
		imgs, err := scanArchive(p)
		if err != nil {
			t.Fatal(err)
		}
		want := []archiveImage{{ref: "kindtest/echo:dev", id: "sha256:" + id}, {ref: "kindtest/echo:v2", id: "sha256:" + id}, {id: "sha256:" + id}}
		if len(imgs) != len(want) {
			t.Fatalf("gzip %v: %v, want %v", gz, imgs, want)
		}
		for i := range want {
			if imgs[i] != want[i] {
				t.Errorf("gzip %v: image %d: %v, want %v", gz, i, imgs[i], want[i])
			}
		}
	}
	if imgs, err := scanArchive(write("oci.tar", false, map[string]string{"index.json": "{}"})); err != nil || imgs != nil {
		t.Errorf("OCI layout without manifest.json: %v %v, want no images and no error", imgs, err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.tar"), "no such file"},
		{dir, "is a directory"},
		{write("notar", false, nil), "empty archive"},
	} {
		if _, err := scanArchive(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("scanArchive(%s): %v, want %q", tc.path, err, tc.want)
		}
	}
	junk := filepath.Join(dir, "junk")
	_ = os.WriteFile(junk, bytes.Repeat([]byte("not a tar file "), 100), 0o644)
	if _, err := scanArchive(junk); err == nil || !strings.Contains(err.Error(), "not an image archive") {
		t.Errorf("junk: %v", err)
	}
}

func TestUnitImportCommand(t *testing.T) {
	cmd := importCommand("linux/amd64", []archiveImage{{ref: "kindtest/echo:dev", id: "sha256:bb"}, {id: "sha256:cc"}, {ref: "x@sha256:dd", id: "sha256:dd"}})
	// Only named images are labelled; the empty argument: the archive names it so.
	if want := []string{"linux/amd64", "", "docker.io/kindtest/echo:dev", "dev.kindtest.image-id=sha256:bb"}; !slices.Equal(cmd[4:], want) {
		t.Errorf("import arguments %q, want %q", cmd[4:], want)
	}
}

// fatalTB records Fatalf and ends the calling goroutine, as testing does.
type fatalTB struct {
	TB
	msg      string
	cleanups int
}

func (f *fatalTB) Helper()           {}
func (f *fatalTB) Name() string      { return "TestFake/sub" }
func (f *fatalTB) Cleanup(fn func()) { f.cleanups++ }
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn with a fatalTB and returns what it failed with.
func fatalOf(fn func(TB)) *fatalTB {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestUnitNamespaceAfterDelete(t *testing.T) {
	c := closedCluster()
	f := fatalOf(func(tb TB) { c.Namespace(tb) })
	if !strings.Contains(f.msg, "was deleted") {
		t.Errorf("Namespace after delete: Fatalf %q, want it to say the cluster was deleted", f.msg)
	}
	if f.cleanups != 0 {
		t.Errorf("%d cleanup(s) registered for a namespace never made", f.cleanups)
	}
}
