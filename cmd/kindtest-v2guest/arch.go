//go:build linux

package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/images"
)

// guestArch is the guest's machine: Debian's and Go's architecture name and
// how qemu emulates it.
type guestArch struct {
	// Name is "amd64" or "arm64", as Debian, Go and image platforms say it.
	Name string
	// Qemu is the system emulator and QemuPackage its Debian package.
	Qemu, QemuPackage string
	// Machine is qemu's board, and CPU its processor model under TCG.
	Machine, CPU string
	// Console is the kernel's name of the board's serial port.
	Console string
}

// guestArches are the machines the tool boots. arm64 is qemu's generic
// virt board; under TCG its neoverse-n1 (Armv8.2, with the large-system
// atomics Go uses when present, and without pointer authentication, which
// qemu emulates slowly) rather than "max".
var guestArches = []guestArch{
	{Name: "amd64", Qemu: "qemu-system-x86_64", QemuPackage: "qemu-system-x86", Machine: "q35", Console: "ttyS0"},
	{Name: "arm64", Qemu: "qemu-system-aarch64", QemuPackage: "qemu-system-arm", Machine: "virt", CPU: "neoverse-n1", Console: "ttyAMA0"},
}

// archFor returns the guest machine named by the -arch flag.
func archFor(name string) (guestArch, error) {
	var names []string
	for _, a := range guestArches {
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	return guestArch{}, fmt.Errorf("-arch %q: want one of %s", name, strings.Join(names, ", "))
}

// native reports whether the guest's processor is this host's: only then
// can KVM run it.
func (a guestArch) native() bool { return a.Name == runtime.GOARCH }

// platform is the guest engine's image platform.
func (a guestArch) platform() string { return "linux/" + a.Name }

// hostRef is the name under which the host's engine holds the guest's
// image ref: `kindtest build -platform` tags the images of a platform that
// is not the host engine's with the architecture after the tag (see
// images.PlatformSuffix).
func (a guestArch) hostRef(ref string) string {
	if a.native() {
		return ref
	}
	return ref + images.PlatformSuffix(a.platform())
}

// guestRef is the name the guest's engine gives an image the host holds as
// ref: the plain name, as on a machine of the guest's architecture.
func (a guestArch) guestRef(ref string) string {
	if a.native() {
		return ref
	}
	return images.WithoutPlatformSuffix(ref, a.platform())
}

// rootlessPackages are the packages only the rootless runs need. The arm64
// guest leaves them out: under emulation each package costs minutes to
// install, and the rootless runs are the amd64 guest's.
var rootlessPackages = []string{"aardvark-dns", "crun", "dbus-user-session", "netavark", "podman", "rootlesskit", "slirp4netns", "uidmap"}

// recipeFor is the guest's recipe on arch.
func recipeFor(a guestArch) recipe {
	r := recipe{Suite: guestRecipe.Suite, Variant: guestRecipe.Variant, Arch: a.Name}
	for _, p := range guestRecipe.Packages {
		switch {
		case p == "linux-image-amd64":
			r.Packages = append(r.Packages, "linux-image-"+a.Name)
		case a.Name != "amd64" && slices.Contains(rootlessPackages, p):
		default:
			r.Packages = append(r.Packages, p)
		}
	}
	return r
}
