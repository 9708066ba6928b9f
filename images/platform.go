package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// Platforms are the platforms kindtest builds images for.
var Platforms = []string{"linux/amd64", "linux/arm64"}

// WithPlatform builds the images for platform ("linux/amd64" or
// "linux/arm64"). Default: the engine's platform, the one its containers
// run natively.
//
// Images for another platform than the engine's are tagged with the
// architecture after the tag (kindtest/node:v1.37.2-arm64, and so the
// component, reaper, registry and load-balancer images), so that they
// live beside the engine's own; `kindtest image save -platform` and
// `kindtest build -platform ... --push` write them out under the plain
// names. Building them runs the target's programs under emulation
// (qemu-user-static and binfmt_misc) on the machine of the engine.
func WithPlatform(platform string) BuildOption {
	return func(c *buildConfig) error {
		if _, err := parsePlatform(platform); err != nil {
			return fmt.Errorf("WithPlatform: %w", err)
		}
		c.platform = platform
		return nil
	}
}

// WithPlatformOf builds for the platform of res, a node image Build made
// on the same engine, and takes that build's finding of whether the
// engine's platform is another one instead of asking the engine again:
// the reaper, registry and load-balancer images built beside the node
// image then carry its suffix (see Result.Local). Given with
// WithPlatform, both must name the same platform. Default: the platform
// WithPlatform names, compared with the engine's.
func WithPlatformOf(res Result) BuildOption {
	return func(c *buildConfig) error {
		p, err := parsePlatform(res.Platform)
		if err != nil {
			return fmt.Errorf("WithPlatformOf: want a Result of Build: %w", err)
		}
		p.foreign = res.suffix != ""
		c.resolved = &p
		return nil
	}
}

// checkPlatforms reports WithPlatform and WithPlatformOf naming two
// platforms.
func (c *buildConfig) checkPlatforms() error {
	if c.resolved == nil || c.platform == "" {
		return nil
	}
	if norm, _ := ParsePlatform(c.platform); norm != c.resolved.String() {
		return fmt.Errorf("WithPlatform(%q) and WithPlatformOf a %s image: one platform per build", c.platform, c.resolved)
	}
	return nil
}

// target returns the platform to build: the one WithPlatformOf gave or,
// without it, the one resolvePlatform finds with the engine.
func (c *buildConfig) target(ctx context.Context, cli *docker.Client) (platform, error) {
	if c.resolved != nil {
		return *c.resolved, nil
	}
	return resolvePlatform(ctx, cli, c.platform)
}

// platform is the target of one build.
type platform struct {
	// arch is the Go architecture of the target, which is also Debian's
	// and the image platform's: amd64 or arm64.
	arch string
	// foreign is set when the engine's platform is another one.
	foreign bool
}

// ParsePlatform checks that kindtest builds images for the platform s,
// one of Platforms or the variant form of linux/arm64 ("linux/arm64/v8",
// which engines on arm64 report), and returns it as Platforms names it.
func ParsePlatform(s string) (string, error) {
	norm := s
	if s == "linux/arm64/v8" {
		norm = "linux/arm64"
	}
	if !slices.Contains(Platforms, norm) {
		return "", fmt.Errorf("kindtest builds images for %s, not %q", strings.Join(Platforms, " and "), s)
	}
	return norm, nil
}

// parsePlatform checks s (see ParsePlatform) and returns it as a target
// with foreign unset.
func parsePlatform(s string) (platform, error) {
	norm, err := ParsePlatform(s)
	if err != nil {
		return platform{}, err
	}
	return platform{arch: strings.TrimPrefix(norm, "linux/")}, nil
}

// resolvePlatform returns the platform to build: requested or, when that
// is "", the engine's; foreign when the engine's is another one.
func resolvePlatform(ctx context.Context, cli *docker.Client, requested string) (platform, error) {
	info, err := cli.Info(ctx)
	if err != nil {
		return platform{}, err
	}
	engine, known := info.Platform()
	if requested == "" {
		if !known {
			return platform{}, fmt.Errorf("the engine runs %s containers, which kindtest cannot name; say which platform to build for with -platform (%s)", info.Architecture, strings.Join(Platforms, ", "))
		}
		requested = engine
	}
	p, err := parsePlatform(requested)
	if err != nil {
		if requested == engine {
			return platform{}, fmt.Errorf("the engine runs %s containers: %w", engine, err)
		}
		return platform{}, err
	}
	p.foreign = p.String() != engine
	return p, nil
}

func (p platform) String() string { return "linux/" + p.arch }

// suffix is what the images of a foreign platform carry after their tag.
func (p platform) suffix() string {
	if p.foreign {
		return PlatformSuffix(p.String())
	}
	return ""
}

// PlatformSuffix is what the images built for platform (one of
// Platforms) carry after their tag on an engine of another platform, so
// that they live beside the engine's own (see WithPlatform): "-arm64" for
// linux/arm64, as in kindtest/node:v1.37.2-arm64. The same suffix names
// each platform's image in a registry beside a multi-platform index.
func PlatformSuffix(platform string) string { return "-" + path.Base(platform) }

// WithoutPlatformSuffix returns ref without the suffix of platform (see
// PlatformSuffix) after its version, the name an engine of that platform
// expects: "kindtest/node:v1.37.2-arm64-<hash>" is
// "kindtest/node:v1.37.2-<hash>" for linux/arm64. A ref whose tag carries
// no such suffix is returned as it is.
func WithoutPlatformSuffix(ref, platform string) string {
	suffix := PlatformSuffix(platform)
	i := strings.LastIndexByte(ref, ':')
	if i <= strings.LastIndexByte(ref, '/') {
		return ref
	}
	name, tag := ref[:i], ref[i+1:]
	if t, ok := strings.CutSuffix(tag, suffix); ok {
		return name + ":" + t
	}
	if j := strings.LastIndex(tag, suffix+"-"); j > 0 {
		return name + ":" + tag[:j] + tag[j+len(suffix):]
	}
	return ref
}

// goEnv is what go build needs beside goEnv to build the target's programs.
func (p platform) goEnv() []string { return []string{"GOOS=linux", "GOARCH=" + p.arch} }

// runsHere reports whether programs built for the target run on the
// machine this process runs on, such as kubeadm, which the build asks for
// the images it expects.
func (p platform) runsHere() bool { return runtime.GOOS == "linux" && runtime.GOARCH == p.arch }

// binDir is where the target's programs are kept under cacheDir: the
// machine's own under bin/<version>, others under
// bin/<version>/linux-<arch>.
func (p platform) binDir(cacheDir, version string) string {
	return p.cacheSubdir(filepath.Join(cacheDir, "bin", version))
}

// cacheSubdir is the directory under dir for the target's programs: dir
// itself for this machine's, dir/linux-<arch> for others.
func (p platform) cacheSubdir(dir string) string {
	if p.runsHere() {
		return dir
	}
	return filepath.Join(dir, "linux-"+p.arch)
}

// QemuArch is qemu's name of the Go architecture arch, which names its
// emulators and interpreters: "x86_64" for amd64 (qemu-system-x86_64),
// "aarch64" for arm64 (qemu-aarch64-static); "" for an architecture
// kindtest builds no images for.
func QemuArch(arch string) string {
	switch arch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return ""
}

// qemuName is the name binfmt_misc registers qemu-user-static's
// interpreter of the Go architecture arch under: "qemu-aarch64".
func qemuName(arch string) string { return "qemu-" + QemuArch(arch) }

// binfmtDir is where the kernel lists binfmt_misc's interpreters; tests
// replace it.
var binfmtDir = "/proc/sys/fs/binfmt_misc"

// checkEmulation makes sure that this machine can run the target's
// programs, as mmdebstrap does when it makes a root file system for
// another architecture (the packages' maintainer scripts run in it): an
// enabled binfmt_misc entry for qemu-user-static's interpreter of the
// target. Nothing is needed for the machine's own architecture.
func checkEmulation(p platform) error {
	if runtime.GOARCH == p.arch {
		return nil
	}
	name := qemuName(p.arch)
	data, err := os.ReadFile(filepath.Join(binfmtDir, name))
	if err == nil && strings.HasPrefix(string(data), "enabled") {
		return nil
	}
	why := fmt.Sprintf("%s has no %s entry", binfmtDir, name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, statErr := os.Stat(filepath.Join(binfmtDir, "status")); statErr != nil {
			why = binfmtDir + " is not mounted"
		}
	case err != nil:
		why = err.Error()
	default:
		why = fmt.Sprintf("%s is disabled", filepath.Join(binfmtDir, name))
	}
	return fmt.Errorf("building %s images on this %s/%s machine runs %s programs under emulation, which is not set up (%s). "+
		"Install qemu-user-static (Debian and Ubuntu: apt-get install qemu-user-static binfmt-support; "+
		"it registers its interpreters with binfmt_misc, mount -t binfmt_misc binfmt_misc %s first where it is not mounted), "+
		"or build on a %s machine",
		p, runtime.GOOS, runtime.GOARCH, p.arch, why, binfmtDir, p)
}

// checkEngineRuns runs /bin/true from image, a root file system of the
// target, on the engine: the preload step runs the target's containerd
// there. An engine on a machine of another architecture needs emulation
// (binfmt_misc with qemu-user-static's interpreters registered with the F
// flag, as Docker Desktop has them).
func (b *builder) checkEngineRuns(ctx context.Context, image string) error {
	if !b.platform.foreign {
		return nil
	}
	name := "kindtest-build-" + b.res.ContentHash[:hashLength] + "-probe"
	code, logs, err := b.cli.RunOnce(ctx, docker.ContainerSpec{
		Name:       name,
		Image:      image,
		Labels:     b.buildLabels(),
		Entrypoint: []string{"/bin/true"},
	})
	if err == nil && code == 0 {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("exit code %d: %s", code, strings.TrimSpace(logs))
	}
	return fmt.Errorf("the engine cannot run %s programs (/bin/true from %s: %v). "+
		"On a Linux engine host, install qemu-user-static and make sure its interpreters are registered with binfmt_misc with the F flag "+
		"(cat %s/%s says flags: ...F); or build on an engine that runs %s natively",
		b.platform, image, err, binfmtDir, qemuName(b.platform.arch), b.platform)
}
