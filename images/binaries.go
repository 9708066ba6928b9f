package images

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// buildBinaries builds every program of the node and its component images
// for the target into b.binDir. The Go build cache makes this fast after
// the first time; another architecture is cross-compiled (GOARCH).
//
// Kubernetes comes first: its kubeadm names the etcd and CoreDNS versions
// to build. A version that the checked-in nested module does not build is
// built from a module derived for it (see deriveModule).
func (b *builder) buildBinaries(ctx context.Context) error {
	src := b.cfg.sourceDir
	moduleDir := func(name string) string { return filepath.Join(src, name) }
	derived := map[string]string{}

	if b.deriveKubernetes {
		dir, err := b.deriveModule(ctx, moduleReq{dir: "kubernetes", path: kubernetesModule, version: b.res.KubernetesVersion})
		if err != nil {
			return err
		}
		derived["kubernetes"] = dir
	}
	// Made only now, so that a version the proxy does not serve leaves no
	// empty directory behind.
	if err := os.MkdirAll(b.binDir, 0o755); err != nil {
		return err
	}
	out := b.binDir + string(filepath.Separator)
	k8sDir := cmp.Or(derived["kubernetes"], moduleDir("kubernetes"))
	k8sFlags := []string{"-trimpath", "-ldflags", KubernetesLDFlags(b.res.KubernetesVersion)}
	if !b.cfg.stock {
		tmp, err := os.MkdirTemp("", "kindtest-kubernetes-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		modfile, applied, err := patchKubernetes(ctx, b.cfg.logger, k8sDir, b.cfg.cacheDir, tmp, timingPatches)
		if err != nil {
			return err
		}
		if modfile != "" {
			k8sFlags = append(k8sFlags, "-modfile", modfile)
		}
		b.patches = applied
		b.cfg.logger.Printf("  Kubernetes timing patches: %s", patchNames(applied))
	}
	k8s := append(slices.Clone(k8sFlags), "-o", out)
	for _, name := range kubernetesCommands {
		k8s = append(k8s, kubernetesModule+"/cmd/"+name)
	}
	if err := goBuild(ctx, b.cfg.logger, strings.Join(kubernetesCommands, ", "), k8sDir, b.platform.goEnv(), k8s...); err != nil {
		return err
	}

	// The build asks kubeadm which images it expects: the target's
	// kubeadm where it runs here, else one built for this machine.
	kubeadm := filepath.Join(b.binDir, "kubeadm")
	if !b.platform.runsHere() {
		kubeadm = filepath.Join(b.binDir, "host", "kubeadm")
		args := append(slices.Clone(k8sFlags), "-o", kubeadm, kubernetesModule+"/cmd/kubeadm")
		if err := goBuild(ctx, b.cfg.logger, "kubeadm for this machine", k8sDir, nil, args...); err != nil {
			return err
		}
	}
	refs, err := b.kubeadmImages(ctx, kubeadm)
	if err != nil {
		return err
	}
	// The provisioner and the NetworkPolicy agent are no kubeadm images,
	// and the same whatever the Kubernetes version.
	b.components = append(refs, LocalPathProvisionerImage, NetworkPoliciesImage)
	reqs, err := modulesToDerive(src, refs)
	if err != nil {
		return err
	}
	for _, req := range reqs {
		dir, err := b.deriveModule(ctx, req)
		if err != nil {
			return err
		}
		derived[req.dir] = dir
	}

	containerdVersion, err := RequiredVersion(filepath.Join(src, "containerd", "go.mod"), "github.com/containerd/containerd/v2")
	if err != nil {
		return err
	}
	const ctrdPkg = "github.com/containerd/containerd/v2"
	ctrd := []string{"-trimpath", "-tags", "no_btrfs,no_devmapper,no_zfs",
		"-ldflags", fmt.Sprintf("-s -w -X %[1]s/version.Version=%[2]s -X %[1]s/version.Revision=%[2]s -X %[1]s/version.Package=%[1]s", ctrdPkg, containerdVersion),
		"-o", out}
	for _, name := range containerdCommands {
		ctrd = append(ctrd, ctrdPkg+"/cmd/"+name)
	}

	npDir := cmp.Or(derived["network-policies"], moduleDir("network-policies"))
	npTmp, err := os.MkdirTemp("", "kindtest-network-policies-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(npTmp)
	npModfile, err := networkPoliciesPatch(ctx, npDir, npTmp)
	if err != nil {
		return err
	}

	builds := []struct {
		module, what string
		args         []string
	}{
		{"containerd", strings.Join(containerdCommands, ", "), ctrd},
		{"etcd", "etcd", []string{"-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.binDir, "etcd"), "."}},
		{"coredns", "coredns", []string{"-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.binDir, "coredns"), "."}},
		{"pause", "pause", []string{"-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(b.binDir, "pause"), "."}},
		{"local-path-provisioner", "local-path-provisioner", []string{"-trimpath",
			"-ldflags", "-s -w -X main.VERSION=" + localPathProvisionerVersion,
			"-o", filepath.Join(b.binDir, "local-path-provisioner"), localPathProvisionerModule}},
		{"network-policies", "kube-network-policies", []string{"-trimpath", "-ldflags", "-s -w", "-modfile", npModfile,
			"-o", filepath.Join(b.binDir, "kube-network-policies"), networkPoliciesModule + "/cmd"}},
	}
	for _, bu := range builds {
		if err := goBuild(ctx, b.cfg.logger, bu.what, cmp.Or(derived[bu.module], moduleDir(bu.module)), b.platform.goEnv(), bu.args...); err != nil {
			return err
		}
	}
	return nil
}

// modulesToDerive returns the etcd and CoreDNS modules to derive for the
// images kubeadm expects: those whose version the checked-in nested module
// (under sourceDir) does not build.
func modulesToDerive(sourceDir string, refs []string) ([]moduleReq, error) {
	reqs, err := componentModules(refs)
	if err != nil {
		return nil, err
	}
	var derive []moduleReq
	for _, req := range reqs {
		have, err := RequiredVersion(filepath.Join(sourceDir, req.dir, "go.mod"), req.path)
		if err != nil {
			return nil, err
		}
		if have != req.version {
			derive = append(derive, req)
		}
	}
	return derive, nil
}
