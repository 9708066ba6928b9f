package enginetest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/flock"
)

// Release names a test engine: the image it runs from and how that image
// is made.
type Release string

const (
	// Docker26 is Debian trixie's docker.io (Docker 26.1.5), with trixie's
	// containerd 1.7.24 and runc.
	Docker26 Release = "docker26"
	// Docker29 is dockerd and docker-proxy built from the Go module
	// github.com/moby/moby/v2 (the nested module docker29/ pins its
	// version), with containerd 2 built from images/containerd, the
	// node image's, and trixie's runc. It keeps images in containerd's
	// store by default.
	Docker29 Release = "docker29"
	// Podman5 is Debian trixie's podman (5.4) with crun, conmon and
	// netavark, rootful, serving its Docker-compatible API (`podman
	// system service`).
	Podman5 Release = "podman5"
	// Podman4 is Debian bookworm's podman (4.3), the same way.
	Podman4 Release = "podman4"
)

// recipe is how a release's image is made: Debian packages, then programs
// built from nested Go modules of this repository into /usr/local/bin.
type recipe struct {
	suite    string
	packages []string
	builds   []goBuild
	// containerdStoreByDefault: the engine keeps images in containerd's
	// store unless its configuration says otherwise.
	containerdStoreByDefault bool
	// features go into the daemon.json of every engine of the release.
	features map[string]bool
	// podman: the engine is `podman system service`, not dockerd.
	podman bool
}

// podmanPackages are a rootful podman's: the engine, its OCI runtime,
// conmon, and netavark with aardvark-dns for bridge networks with DNS
// (trixie's netavark runs nft, bookworm's iptables).
var podmanPackages = []string{"podman", "crun", "conmon", "netavark", "aardvark-dns", "nftables", "iptables", "ca-certificates", "iproute2", "procps"}

// goBuild is one `go build` in a nested module.
type goBuild struct {
	// module is the module's directory, relative to the repository root.
	module string
	tags   string
	// ldflags returns the linker flags; dir is the module's directory.
	ldflags func(ctx context.Context, dir string) (string, error)
	pkgs    []string
}

// runtimePackages are what a Docker engine needs at run time beside its
// own programs, and what the runc wrapper of engineEntrypoint needs (jq).
var runtimePackages = []string{"runc", "iptables", "ca-certificates", "jq", "iproute2", "procps"}

func (r Release) recipe() (recipe, error) {
	switch r {
	case Docker26:
		return recipe{suite: "trixie", packages: append([]string{"docker.io", "containerd"}, runtimePackages...)}, nil
	case Docker29:
		return recipe{
			suite:    "trixie",
			packages: runtimePackages,
			builds: []goBuild{
				{module: "internal/enginetest/docker29", tags: "netgo,osusergo,static_build,exclude_graphdriver_btrfs,nri_no_wasm",
					ldflags: dockerdLDFlags, pkgs: []string{mobyModule + "/cmd/dockerd", mobyModule + "/cmd/docker-proxy"}},
				{module: "images/containerd", tags: "no_btrfs,no_devmapper,no_zfs",
					ldflags: containerdLDFlags, pkgs: []string{containerdModule + "/cmd/containerd", containerdModule + "/cmd/containerd-shim-runc-v2"}},
			},
			containerdStoreByDefault: true,
			// Docker 29 gives each container a time namespace where the
			// kernel has them, which trixie's runc 1.1 does not know
			// ("runc create failed: namespace {"time" ""} does not
			// exist"; runc 1.2 added them). Docker's own escape hatch
			// turns them off, as before Docker 29.
			features: map[string]bool{"time-namespaces": false},
		}, nil
	case Podman5:
		return recipe{suite: "trixie", packages: podmanPackages, podman: true}, nil
	case Podman4:
		return recipe{suite: "bookworm", packages: podmanPackages, podman: true}, nil
	}
	return recipe{}, fmt.Errorf("unknown test engine %q: use enginetest.Docker26, enginetest.Docker29, enginetest.Podman5 or enginetest.Podman4", r)
}

const (
	mobyModule       = "github.com/moby/moby/v2"
	containerdModule = "github.com/containerd/containerd/v2"
)

var engineMmdebstrapArgs = []string{
	"--variant=minbase",
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-exclude=/usr/share/locale/*",
}

// goEnv is the environment of the engine's go builds: static binaries, no
// workspace, no VCS stamping (which would change with every commit).
var goEnv = []string{"CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false"}

// EngineImage is the reference of a release's engine image: a hash of its
// recipe and, for programs built from Go modules, of the modules' go.mod,
// go.sum and build flags and of the Go version, so that a changed input
// makes a new image and an unchanged one is built once. Docker 26's tag is
// what it was before Docker 29 came, "kindtest/test-engine:trixie-HASH".
func EngineImage(ctx context.Context, root string, r Release) (string, error) {
	rc, err := r.recipe()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, rc.suite, strings.Join(rc.packages, ","), strings.Join(engineMmdebstrapArgs, " "))
	for _, b := range rc.builds {
		ldflags, err := b.ldflags(ctx, filepath.Join(root, b.module))
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, b.module, b.tags, ldflags, strings.Join(b.pkgs, " "), strings.Join(goEnv, " "), runtime.Version())
		for _, f := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(root, b.module, f))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", f, len(data))
			h.Write(data)
		}
	}
	if r == Docker26 {
		return "kindtest/test-engine:" + rc.suite + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
	}
	return "kindtest/test-engine:" + string(r) + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

var imageMu sync.Mutex

// EnsureEngineImage builds a release's engine image unless the host engine
// has it, and returns its reference. It is a plain Debian system with
// Docker, also fit to run test binaries in.
func EnsureEngineImage(t testing.TB, host *docker.Client, r Release) string {
	t.Helper()
	// Docker 29's cold build compiles dockerd and containerd.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	ref, err := ensureEngineImage(ctx, t, host, RepoRoot(t), r)
	if err != nil {
		t.Fatalf("test engine image: %v", err)
	}
	return ref
}

// ensureEngineImage builds the engine image unless it exists: the Go
// programs, then mmdebstrap of Debian's packages with the programs copied
// in, imported as a one-layer image.
func ensureEngineImage(ctx context.Context, t testing.TB, host *docker.Client, root string, r Release) (string, error) {
	imageMu.Lock()
	defer imageMu.Unlock()
	ref, err := EngineImage(ctx, root, r)
	if err != nil {
		return "", err
	}
	rc, err := r.recipe()
	if err != nil {
		return "", err
	}
	if _, err := host.InspectImage(ctx, ref); err == nil {
		return ref, nil
	} else if !docker.IsNotFound(err) {
		return "", err
	}
	// Other test processes may build it at the same time: one builds.
	lock, err := flock.Wait(context.Background(), filepath.Join(os.TempDir(), "kindtest-test-engine.lock"), nil)
	if err != nil {
		return "", err
	}
	defer lock.Unlock()
	if _, err := host.InspectImage(ctx, ref); err == nil {
		return ref, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("building %s needs mmdebstrap (apt-get install mmdebstrap): %w", ref, err)
	}
	start := time.Now()
	tmp, err := os.MkdirTemp("", "kt-engine-rootfs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"--include=" + strings.Join(rc.packages, ",")}, engineMmdebstrapArgs...)
	if len(rc.builds) > 0 {
		bin := filepath.Join(tmp, "bin")
		for _, b := range rc.builds {
			if err := b.run(ctx, t, root, bin); err != nil {
				return "", err
			}
		}
		names, err := os.ReadDir(bin)
		if err != nil {
			return "", err
		}
		hook := "copy-in"
		for _, n := range names {
			hook += " " + filepath.Join(bin, n.Name())
		}
		args = append(args, "--customize-hook="+hook+" /usr/local/bin")
	}
	out := filepath.Join(tmp, "rootfs.tar")
	args = append(args, rc.suite, out)
	mstart := time.Now()
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mmdebstrap %s: %w\n%s", rc.suite, err, tail(b, 2000))
	}
	t.Logf("mmdebstrap %s for %s: %v", rc.suite, ref, time.Since(mstart).Round(time.Second))
	f, err := os.Open(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := host.ImportImage(ctx, f, ref, nil); err != nil {
		return "", err
	}
	t.Logf("built %s in %v", ref, time.Since(start).Round(time.Second))
	return ref, nil
}

// run builds b's programs into dir.
func (b goBuild) run(ctx context.Context, t testing.TB, root, dir string) error {
	start := time.Now()
	mod := filepath.Join(root, b.module)
	ldflags, err := b.ldflags(ctx, mod)
	if err != nil {
		return err
	}
	args := append([]string{"build", "-trimpath", "-tags", b.tags, "-ldflags", ldflags, "-o", dir + string(filepath.Separator)}, b.pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), goEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", b.module, err, tail(out, 4000))
	}
	t.Logf("built %s in %v", strings.Join(b.pkgs, ", "), time.Since(start).Round(time.Second))
	return nil
}

// moduleDir downloads a module that the module in dir requires and
// returns where it is and its version.
func moduleDir(ctx context.Context, dir, module string) (path, version string, err error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), goEnv...)
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s (in %s): %w", module, dir, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s: no directory in %q (%v)", module, out, err)
	}
	return m.Dir, m.Version, nil
}

// dockerdLDFlags stamps the version that the daemon reports. The module's
// versions (v2.0.0-beta.N) are not Docker's: Docker's last release at that
// module version, from the module's releases/versions.yaml, comes first,
// and the module version follows as build metadata
// ("29.8.0+moby.v2.0.0-beta.24").
func dockerdLDFlags(ctx context.Context, dir string) (string, error) {
	src, version, err := moduleDir(ctx, dir, mobyModule)
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(src, "releases", "versions.yaml"))
	if err != nil {
		return "", fmt.Errorf("the Docker release of %s@%s: %w", mobyModule, version, err)
	}
	defer f.Close()
	release, err := lastRelease(f)
	if err != nil {
		return "", fmt.Errorf("the Docker release of %s@%s: %w", mobyModule, version, err)
	}
	const pkg = mobyModule + "/dockerversion"
	return fmt.Sprintf("-s -w -X %[1]s.Version=%[2]s+moby.%[3]s -X %[1]s.GitCommit=%[3]s", pkg, release, version), nil
}

// lastRelease reads the `last:` version of the docker section of moby's
// releases/versions.yaml.
func lastRelease(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	inDocker := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			inDocker = strings.TrimSpace(line) == "docker:"
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "last:"); ok && inDocker {
			return strings.Trim(strings.TrimSpace(v), `"'`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no docker: last: version")
}

// containerdLDFlags stamps containerd's version, as the node image's
// build does.
func containerdLDFlags(ctx context.Context, dir string) (string, error) {
	_, version, err := moduleDir(ctx, dir, containerdModule)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("-s -w -X %[1]s/version.Version=%[2]s -X %[1]s/version.Revision=%[2]s -X %[1]s/version.Package=%[1]s", containerdModule, version), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
