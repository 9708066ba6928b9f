package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStagingVersion(t *testing.T) {
	for in, want := range map[string]string{"v1.36.3": "v0.36.3", "v1.37.2": "v0.37.2", "v1.100.0": "v0.100.0"} {
		if got := StagingVersion(in); got != want {
			t.Errorf("stagingVersion(%s) = %s, want %s", in, got, want)
		}
	}
}

// upstreamGoMod is shaped like the go.mod of k8s.io/kubernetes: staging
// modules required at v0.0.0 and replaced with ./staging directories, plus
// replacements of other kinds that must not count.
const upstreamGoMod = `// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.25.0

godebug default=go1.25

require (
	github.com/blang/semver/v4 v4.0.0
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
	k8s.io/kubelet v0.0.0
)

require (
	k8s.io/cri-api v0.0.0 // indirect
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go // the client
	k8s.io/cri-api v0.0.0 => ./staging/src/k8s.io/cri-api
	k8s.io/kubelet => ./staging/src/k8s.io/kubelet
	github.com/example/fork => github.com/example/fork v1.2.3
	k8s.io/api => ./staging/src/k8s.io/api
)

replace k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller

replace example.com/local => ../local
`

func TestStagingModules(t *testing.T) {
	got := StagingModules([]byte(upstreamGoMod))
	want := []string{"k8s.io/api", "k8s.io/client-go", "k8s.io/cri-api", "k8s.io/kubelet", "k8s.io/sample-controller"}
	if !slices.Equal(got, want) {
		t.Fatalf("stagingModules = %v, want %v", got, want)
	}
}

func TestDerivedKubernetesGoMod(t *testing.T) {
	checkedIn := []byte(`// Module kubernetes builds the Kubernetes binaries.
module github.com/kindtest/kindtest/images/kubernetes

go 1.26.0

require k8s.io/kubernetes v1.37.2 // indirect

require k8s.io/api v0.37.2 // indirect

replace k8s.io/api => k8s.io/api v0.37.2
`)
	req := moduleReq{dir: "kubernetes", path: kubernetesModule, version: "v1.36.3"}
	replaces := stagingReplaces(StagingModules([]byte(upstreamGoMod)), StagingVersion(req.version))
	got, err := derivedGoMod(checkedIn, req, replaces, []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kubeadm"})
	if err != nil {
		t.Fatal(err)
	}
	want := `// Derived by kindtest's node image builder from images/kubernetes/go.mod to build k8s.io/kubernetes v1.36.3.
// Generated: edit the checked-in module or the builder instead.
module github.com/kindtest/kindtest/images/kubernetes

go 1.26.0

require k8s.io/kubernetes v1.36.3

replace (
	k8s.io/api => k8s.io/api v0.36.3
	k8s.io/client-go => k8s.io/client-go v0.36.3
	k8s.io/cri-api => k8s.io/cri-api v0.36.3
	k8s.io/kubelet => k8s.io/kubelet v0.36.3
	k8s.io/sample-controller => k8s.io/sample-controller v0.36.3
)

tool (
	k8s.io/kubernetes/cmd/kubelet
	k8s.io/kubernetes/cmd/kubeadm
)
`
	if got != want {
		t.Errorf("derived go.mod:\n%s\nwant:\n%s", got, want)
	}
	// Nothing of the checked-in version survives.
	if strings.Contains(got, "37") {
		t.Errorf("derived go.mod mentions the checked-in version:\n%s", got)
	}
}

func TestDerivedGoModOfComponent(t *testing.T) {
	checkedIn := []byte("module github.com/kindtest/kindtest/images/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v3.7.0\n")
	got, err := derivedGoMod(checkedIn, moduleReq{dir: "etcd", path: etcdModule, version: "v3.6.5"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nmodule github.com/kindtest/kindtest/images/etcd\n",
		"\ngo 1.26.0\n",
		"\nrequire go.etcd.io/etcd/server/v3 v3.6.5\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("derived go.mod lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "v3.7.0") || strings.Contains(got, "replace") || strings.Contains(got, "tool") {
		t.Errorf("derived go.mod:\n%s", got)
	}

	if _, err := derivedGoMod([]byte("go 1.26.0\n"), moduleReq{dir: "etcd"}, nil, nil); err == nil {
		t.Error("a go.mod without a module directive was accepted")
	}
}

func TestComponentModules(t *testing.T) {
	// `kubeadm config images list` output, one release each.
	lists := map[string]struct {
		refs          []string
		etcd, coredns string
	}{
		"v1.37.2": {refs: []string{
			"registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/kube-controller-manager:v1.37.2",
			"registry.k8s.io/kube-scheduler:v1.37.2", "registry.k8s.io/kube-proxy:v1.37.2",
			"registry.k8s.io/coredns/coredns:v1.14.6", "registry.k8s.io/pause:3.10.2", "registry.k8s.io/etcd:3.7.0-0",
		}, etcd: "v3.7.0", coredns: "v1.14.6"},
		"older": {refs: []string{
			"registry.k8s.io/kube-apiserver:v1.33.0", "registry.k8s.io/coredns/coredns:v1.12.1",
			"registry.k8s.io/pause:3.10", "registry.k8s.io/etcd:3.6.5-0",
		}, etcd: "v3.6.5", coredns: "v1.12.1"},
		"tags without v, private registry": {refs: []string{
			"localhost:5000/etcd:3.5.21-0", "localhost:5000/coredns:1.8.0",
		}, etcd: "v3.5.21", coredns: "v1.8.0"},
	}
	for name, l := range lists {
		got, err := componentModules(l.refs)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := []moduleReq{
			{dir: "etcd", path: "go.etcd.io/etcd/server/v3", version: l.etcd},
			{dir: "coredns", path: "github.com/coredns/coredns", version: l.coredns},
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: componentModules = %+v, want %+v", name, got, want)
		}
	}

	for name, refs := range map[string][]string{
		"etcd 3.4 has no server/v3 module": {"registry.k8s.io/etcd:3.4.13-0", "registry.k8s.io/coredns/coredns:v1.7.0"},
		"etcd without tag":                 {"registry.k8s.io/etcd", "registry.k8s.io/coredns/coredns:v1.12.1"},
		"coredns tag not a version":        {"registry.k8s.io/etcd:3.6.5-0", "registry.k8s.io/coredns/coredns:latest"},
		"no coredns":                       {"registry.k8s.io/etcd:3.6.5-0", "registry.k8s.io/pause:3.10"},
		"no etcd":                          {"registry.k8s.io/coredns/coredns:v1.12.1"},
	} {
		if got, err := componentModules(refs); err == nil {
			t.Errorf("%s: got %+v, want an error", name, got)
		}
	}
}

// TestDefaultVersionDerivesNothing checks, against this checkout, that the
// images kubeadm v1.37.2 expects are exactly what the checked-in etcd and
// CoreDNS modules build, so the default build derives no module.
func TestDefaultVersionDerivesNothing(t *testing.T) {
	dir, err := findSourceDir()
	if err != nil {
		t.Fatal(err)
	}
	// `kubeadm config images list --kubernetes-version v1.37.2`
	refs := []string{
		"registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/kube-controller-manager:v1.37.2",
		"registry.k8s.io/kube-scheduler:v1.37.2", "registry.k8s.io/kube-proxy:v1.37.2",
		"registry.k8s.io/coredns/coredns:v1.14.6", "registry.k8s.io/pause:3.10.2", "registry.k8s.io/etcd:3.7.0-0",
	}
	derive, err := modulesToDerive(dir, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(derive) != 0 {
		t.Errorf("default build would derive %+v", derive)
	}

	older := []string{"registry.k8s.io/etcd:3.6.5-0", "registry.k8s.io/coredns/coredns:v1.12.1"}
	derive, err = modulesToDerive(dir, older)
	if err != nil {
		t.Fatal(err)
	}
	if len(derive) != 2 || derive[0].version != "v3.6.5" || derive[1].version != "v1.12.1" {
		t.Errorf("older release: derive %+v, want etcd v3.6.5 and CoreDNS v1.12.1", derive)
	}
}

func TestSandboxImage(t *testing.T) {
	dir, err := findSourceDir()
	if err != nil {
		t.Fatal(err)
	}
	got, err := sandboxImage(filepath.Join(dir, "node", "containerd.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "registry.k8s.io/pause:") {
		t.Errorf("sandbox image of node/containerd.toml = %q", got)
	}
	empty := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(empty, []byte("version = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := sandboxImage(empty); err != nil || got != "" {
		t.Errorf("no sandbox line: got %q, %v", got, err)
	}
}

func TestGoSourceFiles(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"main.go":      "package main\n",
		"main_test.go": "package main\n",
		"go.mod":       "module m\n",
		"sub/x.go":     "package sub\n",
	})
	files, err := goSourceFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].name != "main.go" || string(files[0].data) != "package main\n" {
		t.Errorf("goSourceFiles = %+v", files)
	}
}
