//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/images"
)

// recipe is what the guest's root file system is made of. Its key names
// the cached root file system: change the recipe and a new one is built.
type recipe struct {
	Suite    string
	Variant  string
	Arch     string // Debian's architecture; "" is amd64
	Packages []string
}

// guestRecipe is the amd64 guest (recipeFor gives each architecture's), a
// Debian bookworm guest: kernel 6.1 and systemd 252, which
// mount the unified cgroup v2 hierarchy by default, and Debian's Docker
// (20.10, with cgroup namespaces). Without apparmor Docker cannot load its
// default profile and refuses unprivileged containers (the reaper); the
// hosts kindtest's users run have it. The rootless runs need rootlesskit
// and slirp4netns (dockerd-rootless.sh comes with docker.io), uidmap's
// newuidmap and newgidmap, a user D-Bus for the user's systemd, and
// podman with crun, its first choice of runtime (named, so that apt does
// not settle for docker.io's runc), and netavark with aardvark-dns for
// its networks: bookworm's podman depends on neither netavark nor the
// CNI plugins it would otherwise use.
var guestRecipe = recipe{
	Suite:   "bookworm",
	Variant: "minbase",
	Packages: []string{
		"aardvark-dns", "apparmor", "ca-certificates", "crun", "dbus", "dbus-user-session", "docker.io", "iproute2",
		"iptables", "kmod", "linux-image-amd64", "netavark", "podman", "procps", "rootlesskit", "slirp4netns",
		"systemd", "systemd-sysv", "udev", "uidmap",
	},
}

// key is a short digest of the recipe, the same for the same packages in
// any order. amd64 adds nothing, so that the amd64 guest keeps the key it
// had before there were others.
func (r recipe) key() string {
	pkgs := slices.Clone(r.Packages)
	slices.Sort(pkgs)
	arch := ""
	if r.arch() != "amd64" {
		arch = "\narch=" + r.arch()
	}
	return digest("suite=" + r.Suite + "\nvariant=" + r.Variant + arch + "\npackages=" + strings.Join(pkgs, ","))
}

func (r recipe) arch() string {
	if r.Arch == "" {
		return "amd64"
	}
	return r.Arch
}

// mmdebstrapArgs are the arguments that build the recipe into out, a tar
// whatever out's name: mmdebstrap guesses the format from the name's
// extension, and made a directory of "rootfs-KEY.tar.partial".
func (r recipe) mmdebstrapArgs(out string) []string {
	pkgs := slices.Clone(r.Packages)
	slices.Sort(pkgs)
	return []string{"--architectures=" + r.arch(), "--variant=" + r.Variant, "--format=tar", "--include=" + strings.Join(pkgs, ","), r.Suite, out}
}

// digest is the first 16 hex digits of the SHA-256 of the parts.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// tool is a program the guest run needs and the Debian package it is in.
type tool struct{ command, pkg string }

// tools are those of every guest; toolsFor adds the guest's emulator.
var tools = []tool{
	{"qemu-img", "qemu-utils"},
	{"mmdebstrap", "mmdebstrap"},
	{"mkfs.ext4", "e2fsprogs"},
	{"tar", "tar"},
}

// toolsFor is what a guest on a needs: its emulator, and for a foreign
// root file system the qemu-user interpreter mmdebstrap runs its package
// scripts with (binfmt_misc registers it when the package is installed).
func toolsFor(a guestArch) []tool {
	ts := append([]tool{{a.Qemu, a.QemuPackage}}, tools...)
	if !a.native() {
		ts = append(ts, tool{"qemu-" + images.QemuArch(a.Name) + "-static", "qemu-user-static"})
	}
	return ts
}

// checkTools reports every missing program at once, with the apt command
// that installs them.
func checkTools(a guestArch, lookPath func(string) (string, error)) error {
	var missing, pkgs []string
	for _, t := range toolsFor(a) {
		if _, err := lookPath(t.command); err != nil {
			missing = append(missing, t.command)
			if !slices.Contains(pkgs, t.pkg) {
				pkgs = append(pkgs, t.pkg)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s not found: install with `apt-get install %s` (Debian/Ubuntu packages)",
		strings.Join(missing, ", "), strings.Join(pkgs, " "))
}

// lookPath is exec.LookPath, a variable for tests.
var lookPath = exec.LookPath
