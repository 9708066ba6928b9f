package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kubernetesCommands are the programs built from the nested module
// images/kubernetes.
var kubernetesCommands = []string{
	"kubelet", "kubeadm", "kubectl",
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy",
}

// containerdCommands are the programs built from images/containerd.
var containerdCommands = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

// goEnv is the environment of every go build: static binaries, no
// workspace, no VCS stamping (which would change with every commit and
// defeat the build cache).
var goEnv = []string{"CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false"}

// kubernetesLDFlags stamps the version that `kubectl version` and
// `kubelet --version` print. A fixed build date keeps the link reproducible.
func kubernetesLDFlags(version string) string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	var flags []string
	flags = append(flags, "-s", "-w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+version,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean")
		if pkg == "k8s.io/component-base/version" {
			flags = append(flags, "-X", pkg+".buildDate=1970-01-01T00:00:00Z")
		}
	}
	return strings.Join(flags, " ")
}

// buildBinaries builds every program of the node and its component images
// into b.binDir. The Go build cache makes this fast after the first time.
func (b *builder) buildBinaries(ctx context.Context) error {
	if err := os.MkdirAll(b.binDir, 0o755); err != nil {
		return err
	}
	out := b.binDir + string(filepath.Separator)
	src := b.cfg.sourceDir

	k8s := []string{"build", "-trimpath", "-ldflags", kubernetesLDFlags(b.res.KubernetesVersion), "-o", out}
	for _, name := range kubernetesCommands {
		k8s = append(k8s, "k8s.io/kubernetes/cmd/"+name)
	}

	containerdVersion, err := moduleVersion(filepath.Join(src, "containerd", "go.mod"), "github.com/containerd/containerd/v2")
	if err != nil {
		return err
	}
	const ctrdPkg = "github.com/containerd/containerd/v2"
	ctrd := []string{"build", "-trimpath", "-tags", "no_btrfs,no_devmapper,no_zfs",
		"-ldflags", fmt.Sprintf("-s -w -X %[1]s/version.Version=%[2]s -X %[1]s/version.Revision=%[2]s -X %[1]s/version.Package=%[1]s", ctrdPkg, containerdVersion),
		"-o", out}
	for _, name := range containerdCommands {
		ctrd = append(ctrd, ctrdPkg+"/cmd/"+name)
	}

	builds := []struct {
		module string
		args   []string
	}{
		{"kubernetes", k8s},
		{"containerd", ctrd},
		{"etcd", []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.binDir, "etcd"), "."}},
		{"coredns", []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.binDir, "coredns"), "."}},
		{"pause", []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.binDir, "pause"), "."}},
	}
	for _, bu := range builds {
		if err := command(ctx, filepath.Join(src, bu.module), goEnv, "go", bu.args...); err != nil {
			return err
		}
	}
	return nil
}
