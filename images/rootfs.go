package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// debianSuite is the Debian release of every root file system. bookworm's
// systemd (252) still boots on a cgroup v1 host; trixie's does not.
const debianSuite = "bookworm"

// mmdebstrapArgs are the options of every root file system build besides
// the package list: a minimal system without documentation or locales.
var mmdebstrapArgs = []string{
	"--variant=minbase",
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-include=/usr/share/doc/*/copyright",
	"--dpkgopt=path-exclude=/usr/share/locale/*",
	"--dpkgopt=path-exclude=/usr/share/info/*",
}

// rootfs is a Debian root file system imported as an image.
type rootfs struct {
	// repo is the image repository; the tag is derived from the recipe.
	repo string
	// packages is the package list file, relative to the images/ directory.
	packages string
}

var (
	nodeBase      = rootfs{repo: "kindtest/node-base", packages: "base/packages.txt"}
	kubeProxyBase = rootfs{repo: "kindtest/kube-proxy-base", packages: "kube-proxy/packages.txt"}
)

// ref returns the image reference of the root file system for the
// target p, tagged with a hash of its recipe (the architecture is part of
// it), so that it is built once per package list and architecture.
func (r rootfs) ref(sourceDir string, p platform) (string, []string, error) {
	pkgs, err := readPackages(filepath.Join(sourceDir, r.packages))
	if err != nil {
		return "", nil, err
	}
	parts := append([]string{debianSuite, strings.Join(pkgs, ","), "--architectures=" + p.arch}, mmdebstrapArgs...)
	return r.repo + ":" + debianSuite + "-" + hashStrings(parts...)[:hashLength], pkgs, nil
}

// readPackages reads a package list: one name a line, # comments.
func readPackages(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read package list: %w", err)
	}
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line != "" {
			pkgs = append(pkgs, line)
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("package list %s is empty", path)
	}
	return pkgs, nil
}

// baseImages makes sure the node base and the kube-proxy base exist.
func (b *builder) baseImages(ctx context.Context) error {
	for _, r := range []rootfs{nodeBase, kubeProxyBase} {
		if err := b.rootfsImage(ctx, r); err != nil {
			return err
		}
	}
	// The preload step runs the target's containerd on the engine.
	ref, _, err := nodeBase.ref(b.cfg.sourceDir, b.platform)
	if err != nil {
		return err
	}
	return b.checkEngineRuns(ctx, ref)
}

func (b *builder) rootfsImage(ctx context.Context, r rootfs) error {
	ref, pkgs, err := r.ref(b.cfg.sourceDir, b.platform)
	if err != nil {
		return err
	}
	if _, err := b.cli.InspectImage(ctx, ref); err == nil {
		b.cfg.logger.Printf("  %s exists", ref)
		return nil
	} else if !docker.IsNotFound(err) {
		return err
	}
	args := append([]string{"--include=" + strings.Join(pkgs, ","), "--architectures=" + b.platform.arch}, mmdebstrapArgs...)
	var rootfs io.ReadCloser
	if b.cfg.rootfsInEngine() {
		rootfs, err = b.rootfsOnEngine(ctx, r, ref, args)
	} else {
		rootfs, err = b.rootfsOnHost(ctx, ref, args)
	}
	if err != nil {
		return err
	}
	defer rootfs.Close()
	if err := b.cli.ImportImageFor(ctx, rootfs, ref, b.platform.String(), nil); err != nil {
		return err
	}
	b.cfg.logger.Printf("  %s built", ref)
	return nil
}

// rootfsOnHost runs mmdebstrap with args on this machine and returns the
// root file system's tar file, removed when it is closed.
func (b *builder) rootfsOnHost(ctx context.Context, ref string, args []string) (io.ReadCloser, error) {
	modeArgs, err := mmdebstrapMode(os.Geteuid(), realHost{})
	if err != nil {
		return nil, fmt.Errorf("building the Debian base %s: %w", ref, err)
	}
	tmp, err := os.MkdirTemp(b.cfg.cacheDir, "rootfs-")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(tmp, "rootfs.tar")
	args = append(append(slices.Clone(args), modeArgs...), debianSuite, out)
	if b.platform.arch == runtime.GOARCH {
		b.cfg.logger.Printf("  building %s with mmdebstrap (about a minute; it downloads Debian packages)", ref)
	} else {
		b.cfg.logger.Printf("  building %s for %s with mmdebstrap (minutes: the packages' scripts run under emulation)", ref, b.platform)
	}
	if err := command(ctx, tmp, nil, "mmdebstrap", args...); err != nil {
		os.RemoveAll(tmp)
		if len(modeArgs) > 0 {
			return nil, fmt.Errorf("%w\n%s", err, unshareNeeds)
		}
		return nil, err
	}
	f, err := os.Open(out)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return &closeFunc{Reader: f, close: func() error { err := f.Close(); os.RemoveAll(tmp); return err }}, nil
}

// unshareNeeds says what mmdebstrap's unshare mode needs, for a build run
// without root.
const unshareNeeds = `Without root, kindtest runs mmdebstrap in its unshare mode, which needs:
  - the uidmap package (newuidmap, newgidmap): apt-get install uidmap
  - a range of subordinate ids for your user in /etc/subuid and /etc/subgid
    (usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER)
  - unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1
    where that setting exists; user.max_user_namespaces above 0)
Or build once as root (sudo -E go run github.com/kindtest/kindtest/cmd/kindtest build),
or get a built image: kindtest image load FILE, or KINDTEST_IMAGE=registry/...`

// hostFiles is what mmdebstrapMode looks at on the host; tests replace it.
type hostFiles interface {
	ReadFile(path string) ([]byte, error)
	LookPath(name string) (string, error)
	Username() string
}

type realHost struct{}

// mmdebstrapMode returns mmdebstrap's mode arguments for a build by the
// user euid: none for root (mmdebstrap chroots); --mode=unshare for anyone
// else, after checking what unshare mode needs, so that a build that
// cannot work says why before it starts.
func mmdebstrapMode(euid int, host hostFiles) ([]string, error) {
	if euid == 0 {
		return nil, nil
	}
	var problems []string
	for _, tool := range []string{"newuidmap", "newgidmap"} {
		if _, err := host.LookPath(tool); err != nil {
			problems = append(problems, tool+" is missing")
		}
	}
	user := host.Username()
	for _, file := range []string{"/etc/subuid", "/etc/subgid"} {
		data, _ := host.ReadFile(file)
		found := false
		for line := range strings.Lines(string(data)) {
			name, _, _ := strings.Cut(line, ":")
			if name == user || name == fmt.Sprint(euid) {
				found = true
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s has no range for %s", file, user))
		}
	}
	if data, err := host.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(data)) == "0" {
		problems = append(problems, "kernel.unprivileged_userns_clone is 0")
	}
	if data, err := host.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(data)) == "0" {
		problems = append(problems, "user.max_user_namespaces is 0")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("not running as root, and mmdebstrap's unshare mode cannot work here (%s).\n%s", strings.Join(problems, "; "), unshareNeeds)
	}
	return []string{"--mode=unshare"}, nil
}

func (realHost) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (realHost) LookPath(name string) (string, error) { return exec.LookPath(name) }

func (realHost) Username() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}
