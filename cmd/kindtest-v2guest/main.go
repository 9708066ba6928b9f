//go:build linux

// Command kindtest-v2guest runs kindtest's cgroup v2 suite
// (kindtest/testdata/v2guest) inside a Debian bookworm guest booted under
// qemu, for Linux hosts that are not cgroup v2 themselves (the tool builds
// for Linux only: it needs mmdebstrap and qemu's 9p share). Offline, from Debian
// packages only:
//
//  1. builds the guest's root file system with mmdebstrap and a disk from
//     it (cached under $XDG_CACHE_HOME/kindtest/v2guest, keyed by the recipe);
//  2. boots it once to load the node, reaper and echo images into its
//     Docker (cached too, keyed by the images' IDs);
//  3. boots a throwaway copy of that disk with the compiled suite in a 9p
//     share, prints the guest engine's cgroup facts, runs the suite, then
//     runs it again with dockerd's default cgroup namespace mode set to
//     host, and lists what the engine still holds; with -rootless, does
//     the same on rootless Docker and rootless podman run by a user of
//     the guest, and there also kills a test process of the kindtest
//     package mid-create (TestKilledProcessLeavesNothing);
//  4. reports pass or fail with per-phase timings.
//
// With -arch arm64 the guest is an arm64 machine, emulated under TCG on
// an amd64 host, and runs the host's arm64 images (kindtest build
// -platform linux/arm64).
//
// qemu never outlives the tool: it is killed on a time limit, on Ctrl-C or
// SIGTERM, and by the kernel when the tool itself dies.
//
//	go run ./cmd/kindtest-v2guest [flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// guestEchoImage is this tool's tag of the echo image, fixture.EchoImage in
// the guest.
const guestEchoImage = "kindtest/echo:v2guest"

type options struct {
	cache       string
	image       string
	runPrivate  string
	runHost     string
	bootLimit   time.Duration
	runLimit    time.Duration
	create      time.Duration
	memory      int
	cpus        int
	keep        bool
	prepared    string
	accelFlag   string
	accel       accel // chosen from accelFlag at the start of the run
	archFlag    string
	arch        guestArch // from archFlag
	rootless    string    // the -rootless flag
	engines     []string  // rootless engines from it, in the order the guest runs them
	runRootless string
	kernelArgs  string
}

func main() {
	var o options
	flag.StringVar(&o.cache, "cache", defaultCache(), "where the guest disks are cached")
	flag.StringVar(&o.image, "image", kindtest.DefaultImage, "node image to test, under its name on a machine of the guest's architecture (the host's engine holds another platform's with -ARCH after the tag, as `kindtest build -platform` makes it)")
	flag.StringVar(&o.archFlag, "arch", runtime.GOARCH, "the guest's architecture: amd64 or arm64 (emulated under TCG when it is not this host's)")
	flag.StringVar(&o.runPrivate, "run", ".", "tests to run (go test -run) on the guest's engine as installed (empty: skip)")
	flag.StringVar(&o.runHost, "run-host-cgroupns", ".", "tests to run again with dockerd --default-cgroupns-mode=host (empty: skip)")
	flag.DurationVar(&o.bootLimit, "boot-timeout", 20*time.Minute, "time for the guest to boot until Docker answers")
	flag.DurationVar(&o.runLimit, "timeout", 4*time.Hour, "time limit of each boot of the guest, test runs included")
	flag.DurationVar(&o.create, "create-timeout", 30*time.Minute, "WithCreateTimeout of the suite's clusters")
	flag.IntVar(&o.memory, "memory", 8192, "guest memory, MiB")
	flag.IntVar(&o.cpus, "cpus", 2, "guest CPUs")
	flag.StringVar(&o.prepared, "prepared", "", "use this cached disk layer with the images loaded (a prepared-*.qcow2) whatever the host's engine holds now")
	flag.StringVar(&o.rootless, "rootless", "", "rootless engines to run the suite on as well, as an unprivileged user of the guest: docker, podman or docker,podman (empty: none)")
	flag.StringVar(&o.runRootless, "run-rootless", ".", "tests to run on each rootless engine")
	flag.StringVar(&o.accelFlag, "accel", "auto", "qemu accelerator: auto (KVM when /dev/kvm is usable, else TCG), kvm or tcg")
	flag.StringVar(&o.kernelArgs, "kernel-args", "", "more words for the guest kernel's command line, as ipv6.disable=1 for TestIPv6Off")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's share directory (test logs, artifacts) even when it passes")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "kindtest-v2guest: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runAll(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kindtest-v2guest: FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("kindtest-v2guest: PASS")
}

func defaultCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "kindtest", "v2guest")
}

// logf prints one line of the tool's own progress.
func logf(out io.Writer, format string, args ...any) {
	fmt.Fprintf(out, "v2guest: "+format+"\n", args...)
}

// timings collects the phases of the run, host side and guest side.
type timings struct{ lines []string }

func (t *timings) add(phase string, d time.Duration) {
	t.lines = append(t.lines, fmt.Sprintf("%-28s %v", phase, d.Round(100*time.Millisecond)))
}

// phase runs fn and records how long it took.
func (t *timings) phase(out io.Writer, name string, fn func() error) error {
	began := time.Now()
	logf(out, "phase %s", name)
	err := fn()
	t.add(name, time.Since(began))
	logf(out, "phase %s done in %v", name, time.Since(began).Round(100*time.Millisecond))
	return err
}

func runAll(ctx context.Context, o options, out io.Writer) (err error) {
	if o.arch, err = archFor(o.archFlag); err != nil {
		return err
	}
	if err := checkTools(o.arch, lookPath); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("must run as root: the guest's root file system keeps its files' owners only when unpacked by root")
	}
	if o.cpus < 1 || o.memory < 2048 {
		return fmt.Errorf("-cpus %d -memory %d: want at least 1 CPU and 2048 MiB", o.cpus, o.memory)
	}
	if err := checkKernelArgs(o.kernelArgs); err != nil {
		return err
	}
	if o.engines, err = rootlessEngines(o.rootless); err != nil {
		return err
	}
	if len(o.engines) > 0 && o.arch.Name != "amd64" {
		return fmt.Errorf("-rootless %s -arch %s: the %s guest has no rootless packages (rootlesskit, uidmap, podman); the rootless runs are the amd64 guest's", o.rootless, o.arch.Name, o.arch.Name)
	}
	if err := os.MkdirAll(o.cache, 0o755); err != nil {
		return err
	}
	var tm timings
	defer func() {
		logf(out, "timings (%s guest, accelerator %s):", o.arch.Name, o.accel.Name)
		for _, l := range tm.lines {
			fmt.Fprintln(out, "  "+l)
		}
	}()

	// The guest disk first: it needs no engine, and takes longest.
	var base baseDisk
	if err := tm.phase(out, "guest disk", func() (err error) {
		base, err = ensureBase(ctx, o.cache, recipeFor(o.arch), out)
		return err
	}); err != nil {
		return err
	}
	if err := tm.phase(out, "choose accelerator", func() error {
		a, err := chooseAccel(o.accelFlag, o.arch, func() error {
			if err := kvmProbe(); err != nil {
				return err
			}
			return kvmBootProbe(ctx, base.Kernel, kvmBootLimit)
		})
		o.accel = a
		return err
	}); err != nil {
		return err
	}
	logf(out, "accelerator: %s", o.accel.Why)
	dc, err := docker.New(ctx)
	if err != nil {
		return fmt.Errorf("the node, reaper and echo images come from the host's engine: %w", err)
	}
	defer dc.Close()
	// The images under their names on the host, and what the guest calls
	// them: the suite's names on a machine of the guest's architecture.
	echo := o.arch.hostRef(guestEchoImage)
	refs := []string{o.arch.hostRef(o.image), o.arch.hostRef(kindtest.ReaperImage), echo}
	tags := map[string]string{refs[0]: o.image, refs[1]: kindtest.ReaperImage, echo: fixture.EchoImage}
	var ids []string
	if err := tm.phase(out, "host images", func() error {
		// Other test runs on this engine rebuild the echo image from their
		// own checkouts: this run's copy gets a tag of its own, which the
		// guest turns back into the one the suite uses.
		if err := fixture.BuildEchoFor(ctx, o.arch.platform(), echo); err != nil {
			return err
		}
		for _, ref := range refs {
			img, err := dc.InspectImage(ctx, ref)
			if err != nil {
				return fmt.Errorf("image %s: %w (build the node and reaper images with `go run ./cmd/kindtest build -platform %s`)", ref, err, o.arch.platform())
			}
			if img.Platform != o.arch.platform() {
				return fmt.Errorf("image %s is %s, and the guest is %s (build it with `go run ./cmd/kindtest build -platform %s`)", ref, img.Platform, o.arch.platform(), o.arch.platform())
			}
			ids = append(ids, ref+"="+img.ID)
		}
		return nil
	}); err != nil {
		return err
	}

	work, err := os.MkdirTemp(o.cache, "run-")
	if err != nil {
		return err
	}
	passed := false
	defer func() {
		if passed && !o.keep {
			os.RemoveAll(work)
		} else {
			logf(out, "run directory kept: %s (console.log, share/)", work)
		}
	}()
	share := filepath.Join(work, "share")
	if err := tm.phase(out, "compile tests", func() error {
		if err := os.MkdirAll(share, 0o755); err != nil {
			return err
		}
		for name, pkg := range guestBinaries(o) {
			if err := compileTests(ctx, filepath.Join(share, name), pkg, o.arch); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}

	var prepared string
	if err := tm.phase(out, "prepared disk (images)", func() (err error) {
		if o.prepared != "" {
			if !fileExists(o.prepared) {
				return fmt.Errorf("-prepared %s: no such file", o.prepared)
			}
			logf(out, "using %s as the disk with the images loaded", o.prepared)
			prepared = o.prepared
			return nil
		}
		prepared, err = ensurePrepared(ctx, o, dc, base, refs, ids, tags, &tm, out)
		return err
	}); err != nil {
		return err
	}

	res, err := testRun(ctx, o, base, prepared, work, &tm, out)
	if err != nil {
		return err
	}
	fmt.Fprint(out, res.report())
	if err := res.verdict(); err != nil {
		return err
	}
	passed = true
	return nil
}

// rootlessOrder are the rootless engines the guest can set up, in the
// order it runs them.
var rootlessOrder = []string{"docker", "podman"}

// rootlessEngines reads the -rootless flag: a comma-separated list of
// rootlessOrder's names, returned in that order.
func rootlessEngines(flag string) ([]string, error) {
	var engines []string
	for _, name := range strings.Split(flag, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case !slices.Contains(rootlessOrder, name):
			return nil, fmt.Errorf("-rootless %q: want a comma-separated list of %s, or nothing", flag, strings.Join(rootlessOrder, " and "))
		case !slices.Contains(engines, name):
			engines = append(engines, name)
		}
	}
	slices.SortFunc(engines, func(a, b string) int { return slices.Index(rootlessOrder, a) - slices.Index(rootlessOrder, b) })
	return engines, nil
}

// guestBinaries are the test binaries a run puts in the share (name:
// package): the cgroup v2 suite, and with rootless engines the kindtest
// package's tests, for TestKilledProcessLeavesNothing.
func guestBinaries(o options) map[string]string {
	bins := map[string]string{"v2suite.test": "./kindtest/testdata/v2guest"}
	if len(o.engines) > 0 {
		bins["kindtest.test"] = "./kindtest"
	}
	return bins
}

// compileTests builds pkg's tests as a static test binary for the guest's
// architecture, from the checkout this tool belongs to.
func compileTests(ctx context.Context, out, pkg string, a guestArch) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, pkg)
	cmd.Dir = filepath.Join(fixture.Dir(), "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+a.Name)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile the tests of %s in %s: %w\n%s", pkg, cmd.Dir, err, b)
	}
	return nil
}
