package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustHash(t *testing.T, dir, version string) string {
	t.Helper()
	h, err := contentHash(dir, version, "linux/amd64")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestContentHash(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"kubernetes/go.mod": "module x\n",
		"node/Dockerfile":   "FROM scratch\n",
		"base/packages.txt": "systemd\n",
		"build.go":          "package images\n",
	})
	base := mustHash(t, dir, "v1.37.2")
	if len(base) != 64 {
		t.Fatalf("hash %q: want 64 hex digits", base)
	}
	if again := mustHash(t, dir, "v1.37.2"); again != base {
		t.Fatalf("hash not stable: %s then %s", base, again)
	}

	// Files that are not inputs leave the hash alone.
	for name, content := range map[string]string{
		"README.md":           "# docs\n",
		"build_test.go":       "package images\n",
		"node/.swp":           "editor\n",
		"testdata/fixture":    "x\n",
		".hidden/inside/file": "x\n",
		"reaper.go":           "package images\n",
	} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := mustHash(t, dir, "v1.37.2"); got != base {
			t.Errorf("adding %s changed the hash", name)
		}
	}

	if got := mustHash(t, dir, "v1.36.0"); got == base {
		t.Error("another Kubernetes version gave the same hash")
	}
	if arm, err := contentHash(dir, "v1.37.2", "linux/arm64"); err != nil || arm == base {
		t.Errorf("another platform gave the same hash (%v)", err)
	}

	changes := []struct {
		name   string
		change func(t *testing.T)
	}{
		{"content", func(t *testing.T) { write(t, dir, "node/Dockerfile", "FROM scratch\nENV A=b\n") }},
		{"new file", func(t *testing.T) { write(t, dir, "node/kubelet.service", "[Unit]\n") }},
		{"executable bit", func(t *testing.T) {
			if err := os.Chmod(filepath.Join(dir, "node", "Dockerfile"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename", func(t *testing.T) {
			if err := os.Rename(filepath.Join(dir, "base", "packages.txt"), filepath.Join(dir, "base", "pkgs.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed file", func(t *testing.T) {
			if err := os.Remove(filepath.Join(dir, "build.go")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	prev := base
	for _, c := range changes {
		c.change(t)
		got := mustHash(t, dir, "v1.37.2")
		if got == prev {
			t.Errorf("%s: hash did not change", c.name)
		}
		prev = got
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHashOfThisCheckoutIsStable(t *testing.T) {
	dir, err := findSourceDir()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustHash(t, dir, DefaultKubernetesVersion), mustHash(t, dir, DefaultKubernetesVersion); a != b {
		t.Fatalf("hash of %s not stable: %s then %s", dir, a, b)
	}
}

func TestDefaultKubernetesVersionMatchesModule(t *testing.T) {
	dir, err := findSourceDir()
	if err != nil {
		t.Fatal(err)
	}
	got, err := RequiredVersion(filepath.Join(dir, "kubernetes", "go.mod"), "k8s.io/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	if got != DefaultKubernetesVersion {
		t.Fatalf("images/kubernetes/go.mod builds %s, DefaultKubernetesVersion is %s", got, DefaultKubernetesVersion)
	}
	if DefaultNodeImage != "kindtest/node:"+got {
		t.Fatalf("DefaultNodeImage = %s", DefaultNodeImage)
	}
}

func TestModuleVersion(t *testing.T) {
	dir := writeTree(t, map[string]string{"go.mod": `module m

require github.com/a/b v1.2.3 // indirect

require (
	github.com/c/d v0.1.0
)

replace github.com/e/f => github.com/e/f v9.9.9
`})
	path := filepath.Join(dir, "go.mod")
	for module, want := range map[string]string{"github.com/a/b": "v1.2.3", "github.com/c/d": "v0.1.0"} {
		if got, err := RequiredVersion(path, module); err != nil || got != want {
			t.Errorf("RequiredVersion(%s) = %q, %v; want %s", module, got, err, want)
		}
	}
	if _, err := RequiredVersion(path, "github.com/e/f"); err == nil {
		t.Error("a replace line counted as a requirement")
	}
}

func TestComponentName(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/kube-apiserver:v1.37.2":  "kube-apiserver",
		"registry.k8s.io/coredns/coredns:v1.14.6": "coredns",
		"registry.k8s.io/etcd:3.7.0-0":            "etcd",
		"localhost:5000/pause":                    "pause",
	} {
		if got := componentName(ref); got != want {
			t.Errorf("componentName(%s) = %s, want %s", ref, got, want)
		}
	}
}

func TestKubernetesLDFlags(t *testing.T) {
	flags := KubernetesLDFlags("v1.37.2")
	for _, want := range []string{
		"k8s.io/component-base/version.gitVersion=v1.37.2",
		"k8s.io/component-base/version.gitMajor=1",
		"k8s.io/component-base/version.gitMinor=37",
		"k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("ldflags %q lack %s", flags, want)
		}
	}
}

func TestReadPackages(t *testing.T) {
	dir := writeTree(t, map[string]string{"p.txt": "# comment\nsystemd\n\n  dbus # inline\n"})
	got, err := readPackages(filepath.Join(dir, "p.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "systemd,dbus" {
		t.Fatalf("got %v", got)
	}
}

func TestOptionErrors(t *testing.T) {
	_, err := newBuildConfig([]BuildOption{WithLogger(nil), WithCacheDir("")})
	if err == nil || !strings.Contains(err.Error(), "WithLogger") || !strings.Contains(err.Error(), "WithCacheDir") {
		t.Fatalf("want both option errors, got %v", err)
	}
	_, err = newBuildConfig([]BuildOption{WithSourceDir(t.TempDir())})
	if err == nil || !strings.Contains(err.Error(), "node images are built from a kindtest checkout") {
		t.Fatalf("want checkout error, got %v", err)
	}
}

func TestLockFileWaitsForHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "build.lock")
	unlock, err := lockFile(t.Context(), path, silent{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path, silent{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: got %v, want a deadline error", err)
	}
	unlock()
	unlock2, err := lockFile(t.Context(), path, silent{})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock2()
}

// TestUnitLocalPathProvisionerVersion keeps the provisioner image's tag
// equal to the version its nested module builds.
func TestUnitLocalPathProvisionerVersion(t *testing.T) {
	got, err := RequiredVersion(filepath.Join("local-path-provisioner", "go.mod"), localPathProvisionerModule)
	if err != nil {
		t.Fatal(err)
	}
	if got != localPathProvisionerVersion {
		t.Fatalf("local-path-provisioner/go.mod requires %s %s, the image tag says %s", localPathProvisionerModule, got, localPathProvisionerVersion)
	}
	if componentName(LocalPathProvisionerImage) != "local-path-provisioner" {
		t.Fatalf("%s is not the local-path-provisioner component", LocalPathProvisionerImage)
	}
}

// TestUnitNetworkPoliciesVersion keeps the NetworkPolicy agent image's tag
// equal to the version its nested module builds.
func TestUnitNetworkPoliciesVersion(t *testing.T) {
	got, err := RequiredVersion(filepath.Join("network-policies", "go.mod"), networkPoliciesModule)
	if err != nil {
		t.Fatal(err)
	}
	if got != networkPoliciesVersion {
		t.Fatalf("network-policies/go.mod requires %s %s, the image tag says %s", networkPoliciesModule, got, networkPoliciesVersion)
	}
	if componentName(NetworkPoliciesImage) != "kube-network-policies" {
		t.Fatalf("%s is not the kube-network-policies component", NetworkPoliciesImage)
	}
}
