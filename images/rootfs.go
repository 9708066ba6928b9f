package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// ref returns the image reference of the root file system, tagged with a
// hash of its recipe, so that it is built once per package list.
func (r rootfs) ref(sourceDir string) (string, []string, error) {
	pkgs, err := readPackages(filepath.Join(sourceDir, r.packages))
	if err != nil {
		return "", nil, err
	}
	parts := append([]string{debianSuite, strings.Join(pkgs, ",")}, mmdebstrapArgs...)
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
	return nil
}

func (b *builder) rootfsImage(ctx context.Context, r rootfs) error {
	ref, pkgs, err := r.ref(b.cfg.sourceDir)
	if err != nil {
		return err
	}
	if _, err := b.cli.InspectImage(ctx, ref); err == nil {
		b.cfg.logger.Printf("  %s exists", ref)
		return nil
	} else if !docker.IsNotFound(err) {
		return err
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("building %s needs mmdebstrap (apt-get install mmdebstrap): %w", ref, err)
	}
	tmp, err := os.MkdirTemp(b.cfg.cacheDir, "rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "rootfs.tar")
	args := append([]string{"--include=" + strings.Join(pkgs, ",")}, mmdebstrapArgs...)
	args = append(args, debianSuite, out)
	if err := command(ctx, tmp, nil, "mmdebstrap", args...); err != nil {
		return err
	}
	f, err := os.Open(out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := b.cli.ImportImage(ctx, f, ref, nil); err != nil {
		return err
	}
	b.cfg.logger.Printf("  %s built", ref)
	return nil
}
