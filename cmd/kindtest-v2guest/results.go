//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// testRun boots a throwaway layer over the prepared disk with the test
// binaries in work's share and collects what the guest wrote there.
func testRun(ctx context.Context, o options, base baseDisk, prepared, work string, tm *timings, out io.Writer) (results, error) {
	share := filepath.Join(work, "share")
	if err := writeShare(share, testEnv(o)); err != nil {
		return results{}, err
	}
	layer := filepath.Join(work, "run.qcow2")
	if err := run(ctx, out, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", prepared, layer); err != nil {
		return results{}, err
	}
	defer os.Remove(layer)
	err := tm.phase(out, "guest: test run", func() error {
		return bootGuest(ctx, o, base, layer, share, filepath.Join(work, "console.log"), out)
	})
	readGuestTimings(share, "test run: ", tm)
	if err != nil {
		return results{}, err
	}
	return readResults(share, wantedRuns(o)), nil
}

// testEnv is the guest script's settings for a test run: the suite uses
// the node image the host loaded, under its name on the host.
func testEnv(o options) map[string]string {
	// The suite's own deadline stays inside the guest's, so that a hung
	// test is reported by go test with its goroutines rather than killed.
	runs := len(o.engines)
	for _, r := range []string{o.runPrivate, o.runHost} {
		if r != "" {
			runs++
		}
	}
	testTimeout := o.runLimit * 2 / time.Duration(3*max(runs, 1))
	return map[string]string{
		"MODE": "test", "IMAGE": o.image, "REAPER_IMAGE": kindtest.ReaperImage, "SUITE_ECHO_IMAGE": fixture.EchoImage,
		"RUN_PRIVATE": o.runPrivate, "RUN_HOST": o.runHost, "ROOTLESS": strings.Join(o.engines, ","), "RUN_ROOTLESS": o.runRootless,
		"TEST_TIMEOUT": testTimeout.String(), "CREATE_TIMEOUT": o.create.String(),
	}
}

// suiteRun is one run of tests in the guest: its files in the share are
// docker-cgroup-NAME.txt, test-NAME.log and test-NAME.rc. A rootless
// engine's last run also has the engine's leftovers, in leftovers.
type suiteRun struct {
	name, title string
	leftovers   string // the file listing what the engine held after it
	engine      string // that engine, for the report
}

var (
	runPrivate = suiteRun{name: "private", title: "engine as installed"}
	runHost    = suiteRun{name: "host", title: "dockerd --default-cgroupns-mode=host"}
)

// engineTitles are the rootless engines' names in reports.
var engineTitles = map[string]string{"docker": "rootless Docker", "podman": "rootless podman"}

// rootlessRuns are the rootless engine's runs, in the guest's order: the
// refusal without delegation, the suite, and a test process killed
// mid-create (the kindtest package's TestKilledProcessLeavesNothing),
// after which the engine's leftovers are listed.
func rootlessRuns(engine string) []suiteRun {
	title := engineTitles[engine]
	return []suiteRun{
		{name: engine + "-undelegated", title: title + ", only memory and pids delegated: refused up front"},
		{name: engine, title: title + ", cpu cpuset io memory pids delegated"},
		{name: engine + "-killed", title: title + ", a test process killed with SIGKILL mid-create: nothing left within 30 s",
			leftovers: "leftovers-" + engine + ".txt", engine: "the guest's " + title},
	}
}

// wantedRuns are the suite runs o asks for, in the order the guest runs
// them.
func wantedRuns(o options) []suiteRun {
	var runs []suiteRun
	if o.runPrivate != "" {
		runs = append(runs, runPrivate)
	}
	if o.runHost != "" {
		runs = append(runs, runHost)
	}
	for _, e := range o.engines {
		runs = append(runs, rootlessRuns(e)...)
	}
	return runs
}

// runResult is what one suite run left.
type runResult struct {
	suiteRun
	cgroup    string // docker info's cgroup lines
	log       string
	code      int    // -1: no exit code written
	leftovers string // what its engine held after it, when suiteRun.leftovers names a file
}

// results is what the guest left in the share.
type results struct {
	share           string
	kernel          string
	cgroupInstalled string // docker info's cgroup lines, engine as installed
	runs            []runResult
	leftovers       string // the rootful engine's
	finished        bool
}

func readResults(share string, want []suiteRun) results {
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(share, name))
		return strings.TrimSpace(string(b))
	}
	code := func(name string) int {
		n, err := strconv.Atoi(read(name))
		if err != nil {
			return -1
		}
		return n
	}
	r := results{
		share:           share,
		kernel:          read("kernel.txt"),
		cgroupInstalled: read("docker-cgroup-private.txt"),
		leftovers:       read("leftovers.txt"),
		finished:        fileExists(filepath.Join(share, "tested.ok")),
	}
	for _, w := range want {
		run := runResult{suiteRun: w, cgroup: read("docker-cgroup-" + w.name + ".txt"),
			log: read("test-" + w.name + ".log"), code: code("test-" + w.name + ".rc")}
		if w.leftovers != "" {
			run.leftovers = read(w.leftovers)
		}
		r.runs = append(r.runs, run)
	}
	return r
}

// report summarises the run for a person: engine facts, per-suite
// verdicts with the failures' output, and leftovers.
func (r results) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "v2guest: guest kernel %s\n", r.kernel)
	fmt.Fprintf(&b, "v2guest: docker info (engine as installed):\n%s", indent(strings.Split(r.cgroupInstalled, "\n")))
	for _, run := range r.runs {
		if run.suiteRun != runPrivate {
			fmt.Fprintf(&b, "v2guest: docker info (%s):\n%s", run.title, indent(strings.Split(run.cgroup, "\n")))
		}
		b.WriteString(suiteReport(run.title, run.code, run.log))
	}
	b.WriteString(leftoversReport("the guest's engine", r.leftovers))
	for _, run := range r.runs {
		if run.suiteRun.leftovers != "" {
			b.WriteString(leftoversReport(run.engine, run.leftovers))
		}
	}
	return b.String()
}

func leftoversReport(engine, left string) string {
	if left == "" {
		return "v2guest: left in " + engine + " after the tests: nothing\n"
	}
	return fmt.Sprintf("v2guest: left in %s after the tests:\n%s", engine, indent(strings.Split(left, "\n")))
}

func suiteReport(name string, code int, log string) string {
	var b strings.Builder
	switch code {
	case 0:
		fmt.Fprintf(&b, "v2guest: suite (%s): PASS\n", name)
	case -1:
		fmt.Fprintf(&b, "v2guest: suite (%s): did not finish\n", name)
	default:
		fmt.Fprintf(&b, "v2guest: suite (%s): FAIL (exit code %d)\n", name, code)
	}
	for _, l := range strings.Split(log, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "--- ") || strings.Contains(l, "TIMING ") {
			b.WriteString("    " + t + "\n")
		}
	}
	if code != 0 {
		lines := strings.Split(log, "\n")
		fmt.Fprintf(&b, "  last lines of its output:\n%s", indent(lines[max(0, len(lines)-80):]))
	}
	return b.String()
}

// verdict is nil when every suite run passed, the guest finished and left
// nothing behind.
func (r results) verdict() error {
	var errs []error
	if !r.finished {
		errs = append(errs, errors.New("the guest did not finish its run (see the console log)"))
	}
	for _, run := range r.runs {
		if run.code != 0 {
			errs = append(errs, fmt.Errorf("suite (%s): exit code %d", run.title, run.code))
		}
	}
	if r.leftovers != "" {
		errs = append(errs, errors.New("the guest's engine still holds objects after the tests"))
	}
	for _, run := range r.runs {
		if run.suiteRun.leftovers != "" && run.leftovers != "" {
			errs = append(errs, fmt.Errorf("%s still holds objects after the tests", run.engine))
		}
	}
	if !strings.Contains(r.cgroupInstalled, "Cgroup Version: 2") {
		errs = append(errs, errors.New("the guest's engine does not report cgroup version 2"))
	}
	return errors.Join(errs...)
}
