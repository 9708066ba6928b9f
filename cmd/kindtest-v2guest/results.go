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
)

// testRun boots a throwaway layer over the prepared disk with the suite in
// the share and collects what the guest wrote there.
func testRun(ctx context.Context, o options, base baseDisk, prepared, suite, work string, tm *timings, out io.Writer) (results, error) {
	share := filepath.Join(work, "share")
	if err := os.MkdirAll(share, 0o755); err != nil {
		return results{}, err
	}
	if err := os.Rename(suite, filepath.Join(share, "v2suite.test")); err != nil {
		return results{}, err
	}
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
	return readResults(share, o.runHost != ""), nil
}

// testEnv is the guest script's settings for a test run: the suite uses
// the node image the host loaded, under its name on the host.
func testEnv(o options) map[string]string {
	// The suite's own deadline stays inside the guest's, so that a hung
	// test is reported by go test with its goroutines rather than killed.
	testTimeout := o.runLimit / 3
	if o.runHost == "" {
		testTimeout = o.runLimit * 2 / 3
	}
	return map[string]string{
		"MODE": "test", "IMAGE": o.image, "RUN_PRIVATE": o.runPrivate, "RUN_HOST": o.runHost,
		"TEST_TIMEOUT": testTimeout.String(), "CREATE_TIMEOUT": o.create.String(),
	}
}

// results is what the guest left in the share.
type results struct {
	share                 string
	kernel                string
	cgroupPrivate         string // docker info's cgroup lines, engine as installed
	cgroupHost            string // the same with default-cgroupns-mode host
	logPrivate, logHost   string
	codePrivate, codeHost int // -1: no exit code written
	leftovers             string
	finished, wantHostRun bool
}

func readResults(share string, wantHost bool) results {
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
	return results{
		share:         share,
		kernel:        read("kernel.txt"),
		cgroupPrivate: read("docker-cgroup-private.txt"),
		cgroupHost:    read("docker-cgroup-host.txt"),
		logPrivate:    read("test-private.log"),
		logHost:       read("test-host.log"),
		codePrivate:   code("test-private.rc"),
		codeHost:      code("test-host.rc"),
		leftovers:     read("leftovers.txt"),
		finished:      fileExists(filepath.Join(share, "tested.ok")),
		wantHostRun:   wantHost,
	}
}

// report summarises the run for a person: engine facts, per-suite
// verdicts with the failures' output, and leftovers.
func (r results) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "v2guest: guest kernel %s\n", r.kernel)
	fmt.Fprintf(&b, "v2guest: docker info (engine as installed):\n%s", indent(strings.Split(r.cgroupPrivate, "\n")))
	b.WriteString(suiteReport("engine as installed", r.codePrivate, r.logPrivate))
	if r.wantHostRun {
		fmt.Fprintf(&b, "v2guest: docker info (default-cgroupns-mode host):\n%s", indent(strings.Split(r.cgroupHost, "\n")))
		b.WriteString(suiteReport("dockerd --default-cgroupns-mode=host", r.codeHost, r.logHost))
	}
	if r.leftovers == "" {
		b.WriteString("v2guest: left in the guest's engine after the tests: nothing\n")
	} else {
		fmt.Fprintf(&b, "v2guest: left in the guest's engine after the tests:\n%s", indent(strings.Split(r.leftovers, "\n")))
	}
	return b.String()
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
	if r.codePrivate != 0 {
		errs = append(errs, fmt.Errorf("suite on the engine as installed: exit code %d", r.codePrivate))
	}
	if r.wantHostRun && r.codeHost != 0 {
		errs = append(errs, fmt.Errorf("suite with default-cgroupns-mode host: exit code %d", r.codeHost))
	}
	if r.leftovers != "" {
		errs = append(errs, errors.New("the guest's engine still holds objects after the tests"))
	}
	if !strings.Contains(r.cgroupPrivate, "Cgroup Version: 2") {
		errs = append(errs, errors.New("the guest's engine does not report cgroup version 2"))
	}
	return errors.Join(errs...)
}
