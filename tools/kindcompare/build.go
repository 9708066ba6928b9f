package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Versions: kind's, the Kubernetes release its node image carries, and
// what kind v0.33.0's images/base/Dockerfile builds from git (its ARGs),
// here built from the Go module proxy.
const (
	kindVersion          = "v0.33.0"
	kubernetesVersion    = "v1.37.2"
	containerdVersion    = "v2.3.4"
	runcVersion          = "v1.4.3"
	crictlVersion        = "v1.37.0" // kind: v1.36.0, which the proxy does not serve
	cniPluginsVersion    = "v1.9.1"
	fuseOverlayfsVersion = "v2.1.7"
)

// baseDockerfile is kind's base image recipe for the legacy builder.
//
//go:embed base.Dockerfile
var baseDockerfile string

// goBinary is one program built with `go install pkg@version`.
type goBinary struct {
	pkg, version string
	cgo          bool
	tags         string
	ldflags      string
}

func (g goBinary) name() string { return filepath.Base(g.pkg) }

// baseBinaries are what kind's base image build compiles in its go-build
// stages, with the build tags kind's Dockerfile gives.
var baseBinaries = []goBinary{
	{pkg: "github.com/containerd/containerd/v2/cmd/containerd", version: containerdVersion, tags: "no_aufs,no_zfs,no_btrfs,no_devmapper", ldflags: "-X github.com/containerd/containerd/v2/version.Version=" + containerdVersion},
	{pkg: "github.com/containerd/containerd/v2/cmd/ctr", version: containerdVersion, tags: "no_aufs,no_zfs,no_btrfs,no_devmapper", ldflags: "-X github.com/containerd/containerd/v2/version.Version=" + containerdVersion},
	{pkg: "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", version: containerdVersion, tags: "no_aufs,no_zfs,no_btrfs,no_devmapper", ldflags: "-X github.com/containerd/containerd/v2/version.Version=" + containerdVersion},
	// runc needs cgo (nsenter) and libseccomp (the seccomp tag): on
	// Debian, libseccomp-dev; the base image installs libseccomp2.
	{pkg: "github.com/opencontainers/runc", version: runcVersion, cgo: true, tags: "seccomp,urfave_cli_no_docs"},
	{pkg: "sigs.k8s.io/cri-tools/cmd/crictl", version: crictlVersion, ldflags: "-X sigs.k8s.io/cri-tools/pkg/version.Version=" + crictlVersion},
	{pkg: "github.com/containernetworking/plugins/plugins/ipam/host-local", version: cniPluginsVersion},
	{pkg: "github.com/containernetworking/plugins/plugins/main/loopback", version: cniPluginsVersion},
	{pkg: "github.com/containernetworking/plugins/plugins/main/ptp", version: cniPluginsVersion},
	{pkg: "github.com/containernetworking/plugins/plugins/meta/portmap", version: cniPluginsVersion},
	{pkg: "github.com/containerd/fuse-overlayfs-snapshotter/v2/cmd/containerd-fuse-overlayfs-grpc", version: fuseOverlayfsVersion},
}

var kindCLI = goBinary{pkg: "sigs.k8s.io/kind", version: kindVersion}

// Images kind's node image build wants besides the four of the
// Kubernetes release tarball: those kubeadm lists (etcd, CoreDNS), the
// sandbox image of kind's containerd config, and those of kind's default
// CNI and storage manifests (pkg/build/nodeimage/const_*.go).
const (
	etcdImage          = "registry.k8s.io/etcd:3.7.0-0"
	corednsImage       = "registry.k8s.io/coredns/coredns:v1.14.6"
	pauseImage         = "registry.k8s.io/pause:3.10"
	kindnetdImage      = "docker.io/kindest/kindnetd:v20260820-69b56db7"
	provisionerImage   = "docker.io/kindest/local-path-provisioner:v20260820-69b56db7"
	storageHelperImage = "docker.io/kindest/local-path-helper:v20260131-7181c60a"
)

// builder builds kind and its images; its methods share the caches.
type builder struct {
	cacheDir string
	repo     string
	kindBin  string // the kind CLI, once built
}

// build makes everything kind needs and returns the node image.
func (b *builder) build(ctx context.Context) (string, error) {
	var err error
	if b.kindBin, err = b.goInstall(ctx, kindCLI); err != nil {
		return "", err
	}
	kindDir, err := b.moduleDir(ctx, "sigs.k8s.io/kind@"+kindVersion)
	if err != nil {
		return "", err
	}
	debian, err := b.debianImage(ctx)
	if err != nil {
		return "", err
	}
	base, err := b.baseImage(ctx, kindDir, debian)
	if err != nil {
		return "", err
	}
	stockBin, err := b.stockBinaries(ctx)
	if err != nil {
		return "", err
	}
	return b.nodeImage(ctx, base, debian, stockBin)
}

// goInstall builds g into the cache, once, and returns the binary's path.
func (b *builder) goInstall(ctx context.Context, g goBinary) (string, error) {
	dir := filepath.Join(b.cacheDir, "bin", g.name()+"-"+g.version)
	bin := filepath.Join(dir, g.name())
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Printf("building %s@%s\n", g.pkg, g.version)
	cgo := "CGO_ENABLED=0"
	if g.cgo {
		cgo = "CGO_ENABLED=1"
	}
	args := []string{"install", "-trimpath", "-tags=" + g.tags, "-ldflags=-s -w " + g.ldflags, g.pkg + "@" + g.version}
	if _, err := command(ctx, b.cacheDir, []string{cgo, "GOBIN=" + dir, "GOFLAGS=", "GOWORK=off"}, "go", args...); err != nil {
		if g.cgo {
			err = fmt.Errorf("%w(runc needs a C compiler and libseccomp's headers: apt-get install gcc libseccomp-dev)", err)
		}
		return "", err
	}
	return bin, nil
}

// moduleDir downloads a module (mod@version) and returns its directory.
func (b *builder) moduleDir(ctx context.Context, mod string) (string, error) {
	out, err := command(ctx, b.cacheDir, []string{"GOFLAGS=", "GOWORK=off"}, "go", "mod", "download", "-json", mod)
	if err != nil {
		return "", err
	}
	var m struct{ Dir string }
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory in %q", mod, out)
	}
	return m.Dir, nil
}

// imageExists reports whether the engine has ref.
func imageExists(ctx context.Context, ref string) bool {
	_, err := command(ctx, "", nil, "docker", "image", "inspect", "--format", "{{.Id}}", ref)
	return err == nil
}

// debianImage returns a Debian bookworm image made with mmdebstrap: the
// stand-in for kind's debian:trixie-slim (no registry; and trixie's
// systemd does not boot on a cgroup v1 host).
func (b *builder) debianImage(ctx context.Context) (string, error) {
	// minbase without documentation, manuals and locales: what makes
	// Debian's -slim images slim
	args := []string{"--variant=minbase",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		"bookworm"}
	hash, err := hashInputs(args...)
	if err != nil {
		return "", err
	}
	ref := "kindtest-kind/debian:bookworm-" + hash
	if imageExists(ctx, ref) {
		return ref, nil
	}
	fmt.Printf("building %s with mmdebstrap\n", ref)
	tmp, err := os.MkdirTemp(b.cacheDir, "debian-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	rootfs := filepath.Join(tmp, "rootfs.tar")
	if _, err := command(ctx, tmp, nil, "mmdebstrap", append(args, rootfs)...); err != nil {
		return "", fmt.Errorf("%w(needs mmdebstrap: apt-get install mmdebstrap)", err)
	}
	if _, err := command(ctx, tmp, nil, "docker", "import", "--change", "CMD [\"bash\"]", rootfs, ref); err != nil {
		return "", err
	}
	removeOthers(ctx, ref)
	return ref, nil
}

// baseImage builds kind's base image from kind's images/base/files and
// base.Dockerfile, with the binaries built from Go modules.
func (b *builder) baseImage(ctx context.Context, kindDir, debian string) (string, error) {
	bins := map[string]string{}
	for _, g := range baseBinaries {
		path, err := b.goInstall(ctx, g)
		if err != nil {
			return "", err
		}
		bins[g.name()] = path
	}
	filesDir := filepath.Join(kindDir, "images", "base", "files")
	files, err := listFiles(filesDir)
	if err != nil {
		return "", err
	}
	var inputs []string
	for _, f := range files {
		inputs = append(inputs, filepath.Join(filesDir, f))
	}
	for _, g := range baseBinaries {
		inputs = append(inputs, bins[g.name()])
	}
	hash, err := hashInputs(append([]string{baseDockerfile, debian, imageID(ctx, debian)}, inputs...)...)
	if err != nil {
		return "", err
	}
	ref := "kindtest-kind/base:" + kindVersion + "-" + hash
	if imageExists(ctx, ref) {
		return ref, nil
	}
	fmt.Printf("building %s\n", ref)
	ctxDir, err := os.MkdirTemp(b.cacheDir, "base-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(ctxDir)
	for _, f := range files {
		// kind's Dockerfile sets modes with COPY --chmod (BuildKit only):
		// scripts 0755, everything else 0644. The copies carry them.
		mode := os.FileMode(0o644)
		if strings.HasPrefix(f, "usr/local/bin/") || strings.HasPrefix(f, "kind/bin/") {
			mode = 0o755
		}
		if err := copyFile(filepath.Join(filesDir, f), filepath.Join(ctxDir, "files", f), mode); err != nil {
			return "", err
		}
	}
	for name, p := range bins {
		if err := copyFile(p, filepath.Join(ctxDir, "bin", name), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(baseDockerfile), 0o644); err != nil {
		return "", err
	}
	if err := dockerBuild(ctx, ctxDir, ref, "BASE_IMAGE="+debian); err != nil {
		return "", err
	}
	removeOthers(ctx, ref)
	return ref, nil
}

// stockBinaries returns kindtest's directory of stock Kubernetes binaries
// (with etcd, CoreDNS, pause and the local-path provisioner), building
// them with `kindtest build -stock` when they are missing.
func (b *builder) stockBinaries(ctx context.Context) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "kindtest", "bin", kubernetesVersion+"-stock")
	need := []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns", "pause", "local-path-provisioner"}
	missing := func() bool {
		for _, n := range need {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				return true
			}
		}
		return false
	}
	if missing() {
		fmt.Println("building kindtest's stock Kubernetes binaries: go run ./cmd/kindtest build -stock")
		if _, err := command(ctx, b.repo, nil, "go", "run", "./cmd/kindtest", "build", "-stock"); err != nil {
			return "", err
		}
		if missing() {
			return "", fmt.Errorf("kindtest build -stock left no binaries in %s", dir)
		}
	}
	return dir, nil
}

// component is one image of the node image: built here under local, and
// named target inside the node.
type component struct {
	local, target string
	binary        string // the binary under stockBin, "" for none
	from          string // "" for scratch
	extra         string // more Dockerfile lines
}

// nodeImage builds kind's node image from a Kubernetes release tarball
// made of the stock binaries and component images.
func (b *builder) nodeImage(ctx context.Context, base, debian, stockBin string) (string, error) {
	kindnetd, err := b.kindnetdStandIn(ctx)
	if err != nil {
		return "", err
	}
	debianID := imageID(ctx, debian)
	comps := map[string][]component{
		// The four images of a release tarball; every other image kind
		// wants rides in the first file (see writeImageArchive).
		"kube-apiserver.tar": {
			{local: "kindtest-kind/kube-apiserver", target: "registry.k8s.io/kube-apiserver:" + kubernetesVersion, binary: "kube-apiserver"},
			{local: "kindtest-kind/etcd", target: etcdImage, binary: "etcd"},
			{local: "kindtest-kind/coredns", target: corednsImage, binary: "coredns"},
			{local: "kindtest-kind/pause", target: pauseImage, binary: "pause"},
			{local: "kindtest-kind/kindnetd", target: kindnetdImage, binary: kindnetd},
			{local: "kindtest-kind/local-path-provisioner", target: provisionerImage, binary: "local-path-provisioner", from: debian},
			{local: "kindtest-kind/local-path-helper", target: storageHelperImage, from: debian},
		},
		"kube-controller-manager.tar": {{local: "kindtest-kind/kube-controller-manager", target: "registry.k8s.io/kube-controller-manager:" + kubernetesVersion, binary: "kube-controller-manager"}},
		"kube-scheduler.tar":          {{local: "kindtest-kind/kube-scheduler", target: "registry.k8s.io/kube-scheduler:" + kubernetesVersion, binary: "kube-scheduler"}},
		"kube-proxy.tar": {{local: "kindtest-kind/kube-proxy", target: "registry.k8s.io/kube-proxy:" + kubernetesVersion, binary: "kube-proxy", from: debian,
			// what the kube-proxy image has for its iptables and nftables modes
			extra: "RUN apt-get update && apt-get install -y --no-install-recommends iptables ipset conntrack kmod nftables && apt-get clean && rm -rf /var/lib/apt/lists/*\n"}},
	}
	binPath := func(c component) string {
		if filepath.IsAbs(c.binary) {
			return c.binary
		}
		return filepath.Join(stockBin, c.binary)
	}
	inputs := []string{base, imageID(ctx, base), debianID}
	for _, f := range []string{"kubeadm", "kubelet", "kubectl"} {
		inputs = append(inputs, filepath.Join(stockBin, f))
	}
	archives := sortedKeys(comps)
	for _, a := range archives {
		for _, c := range comps[a] {
			inputs = append(inputs, c.target, c.from, c.extra)
			if c.binary != "" {
				inputs = append(inputs, binPath(c))
			}
		}
	}
	hash, err := hashInputs(inputs...)
	if err != nil {
		return "", err
	}
	ref := "kindtest-kind/node:" + kubernetesVersion + "-" + hash
	if imageExists(ctx, ref) {
		return ref, nil
	}

	work, err := os.MkdirTemp(b.cacheDir, "node-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	binDir := filepath.Join(src, "kubernetes", "server", "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	for _, a := range archives {
		var refs []imageRef
		for _, c := range comps[a] {
			local := c.local + ":" + hash
			from := c.from
			if from == "" {
				from = "scratch"
			}
			dockerfile := "FROM " + from + "\n" + c.extra
			var files map[string]string
			if c.binary != "" {
				name := filepath.Base(c.binary)
				files = map[string]string{name: binPath(c)}
				dockerfile += fmt.Sprintf("COPY %[1]s /usr/local/bin/%[1]s\nENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin\nENTRYPOINT [\"/usr/local/bin/%[1]s\"]\n", name)
			}
			fmt.Printf("building %s (%s in the node)\n", local, c.target)
			if err := b.smallImage(ctx, local, dockerfile, files); err != nil {
				return "", err
			}
			refs = append(refs, imageRef{local: local, target: c.target, id: imageID(ctx, local)})
		}
		if err := writeImageArchive(ctx, filepath.Join(binDir, a), refs); err != nil {
			return "", err
		}
		for _, r := range refs {
			// the archive holds them now; the engine keeps only the node image
			_, _ = command(ctx, "", nil, "docker", "rmi", r.local)
		}
	}
	for _, f := range []string{"kubeadm", "kubelet", "kubectl"} {
		if err := copyFile(filepath.Join(stockBin, f), filepath.Join(binDir, f), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(src, "kubernetes", "version"), []byte(kubernetesVersion+"\n"), 0o644); err != nil {
		return "", err
	}
	tarball := filepath.Join(work, "kubernetes-server-linux-amd64.tar.gz")
	if err := writeTarGz(tarball, src); err != nil {
		return "", err
	}
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	// kind extracts the tarball under TMPDIR and leaves it there.
	tmp := filepath.Join(work, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	fmt.Printf("building %s: kind build node-image --type file ...\n", ref)
	if _, err := command(ctx, work, []string{"TMPDIR=" + tmp}, b.kindBin, "build", "node-image", "--type", "file", tarball, "--base-image", base, "--image", ref); err != nil {
		return "", err
	}
	removeOthers(ctx, ref)
	return ref, nil
}

// kindnetdStandIn builds the stand-in for kind's kindnetd (see
// kindnetd/main.go) and returns the binary's path.
func (b *builder) kindnetdStandIn(ctx context.Context) (string, error) {
	dir := filepath.Join(b.cacheDir, "bin", "kindnetd-stand-in")
	bin := filepath.Join(dir, "kindnetd")
	_, err := command(ctx, filepath.Join(b.repo, "tools"), []string{"CGO_ENABLED=0", "GOWORK=off"}, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./kindcompare/kindnetd")
	return bin, err
}

// smallImage builds ref from a Dockerfile and files (context name to
// path), through the legacy builder.
func (b *builder) smallImage(ctx context.Context, ref, dockerfile string, files map[string]string) error {
	dir, err := os.MkdirTemp(b.cacheDir, "image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, p := range files {
		if err := copyFile(p, filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	return dockerBuild(ctx, dir, ref)
}

// dockerBuild builds ref from the context dir with the legacy builder
// (the engine here has no BuildKit), leaving no build container behind,
// and removes the untagged images of intermediate stages, which carry
// the label dev.kindtest.kindcompare.stage.
func dockerBuild(ctx context.Context, dir, ref string, buildArgs ...string) error {
	args := []string{"build", "--force-rm", "-t", ref}
	for _, a := range buildArgs {
		args = append(args, "--build-arg", a)
	}
	_, err := command(ctx, dir, []string{"DOCKER_BUILDKIT=0"}, "docker", append(args, ".")...)
	if out, lerr := command(ctx, "", nil, "docker", "images", "-q", "--filter", "dangling=true", "--filter", "label=dev.kindtest.kindcompare.stage"); lerr == nil {
		if ids := strings.Fields(out); len(ids) > 0 {
			_, _ = command(ctx, "", nil, "docker", append([]string{"rmi"}, ids...)...)
		}
	}
	return err
}

// removeOthers removes the images of ref's repository other than ref,
// built here before from other inputs; one a container uses stays.
func removeOthers(ctx context.Context, ref string) {
	repo, _ := splitRef(ref)
	out, err := command(ctx, "", nil, "docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repo)
	if err != nil {
		return
	}
	for _, other := range strings.Fields(out) {
		if other != ref {
			_, _ = command(ctx, "", nil, "docker", "rmi", other)
		}
	}
}

// imageID returns the engine's ID of ref, "" when it has none.
func imageID(ctx context.Context, ref string) string {
	out, err := command(ctx, "", nil, "docker", "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// hashInputs returns 12 hex digits of a hash over the inputs: an input
// that names a regular file stands for the file's content.
func hashInputs(inputs ...string) (string, error) {
	h := sha256.New()
	for _, in := range inputs {
		fmt.Fprintf(h, "%q\n", in)
		if !filepath.IsAbs(in) {
			continue
		}
		fi, err := os.Stat(in)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		f, err := os.Open(in)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// listFiles returns the regular files under dir, relative to it, sorted.
func listFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files = append(files, rel)
		return err
	})
	sort.Strings(files)
	return files, err
}

// copyFile copies src to dst with mode, making dst's directory.
func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// writeTarGz writes the tree under dir to path as a gzip-compressed tar.
func writeTarGz(path, dir string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	gz, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
