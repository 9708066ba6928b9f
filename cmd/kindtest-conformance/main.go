// Command kindtest-conformance runs the Kubernetes conformance suite (the
// [Conformance] specs of k8s.io/kubernetes/test/e2e) on a kindtest
// cluster: it builds e2e.test, ginkgo, kubectl and the test images for the
// node image's Kubernetes version from the Go module proxy and Debian
// packages, creates a cluster, loads the images, runs the parallel specs
// and then the serial ones, writes their JUnit reports and a summary, and
// deletes the cluster however the run ends.
//
//	go run ./cmd/kindtest build && go run ./cmd/kindtest-conformance
//	go run ./cmd/kindtest-conformance -focus '\[sig-network\] Services'
//
// It runs from a kindtest checkout: the nested module conformance/ builds
// the binaries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/kindtest"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// logger is the one-method logger the library and the builders take.
type logger interface {
	Printf(format string, args ...any)
}

// options are the command's flags.
type options struct {
	image, version        string
	workers, controlPlane int
	focus, skip           string
	parallel              int
	serial, parallelRun   bool
	out, cacheDir         string
	nice                  int
	buildOnly             bool
	timeout               time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kindtest-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.image, "image", kindtest.Image(), "node image (default: $KINDTEST_IMAGE, else kindtest's default); its Kubernetes version decides the e2e tests built")
	fs.StringVar(&o.version, "kubernetes-version", "", "build the e2e tests of this Kubernetes version (default: the node image's); with -build-only, no node image is needed")
	fs.IntVar(&o.workers, "workers", 2, "worker nodes")
	fs.IntVar(&o.controlPlane, "control-planes", 1, "control-plane nodes (1, 3 or 5)")
	fs.StringVar(&o.focus, "focus", "", "run only the conformance specs whose name matches this regular expression (ginkgo --focus)")
	fs.StringVar(&o.skip, "skip", "", "leave out the specs whose name matches this regular expression (ginkgo --skip)")
	fs.IntVar(&o.parallel, "parallel", 4, "ginkgo processes for the specs that may run in parallel")
	fs.BoolVar(&o.parallelRun, "run-parallel", true, "run the conformance specs that are not [Serial], in parallel")
	fs.BoolVar(&o.serial, "run-serial", true, "then run the [Serial] conformance specs, one at a time")
	fs.StringVar(&o.out, "out", "conformance-results", "directory for the JUnit reports, the ginkgo logs and summary.txt")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "where the binaries are kept (default: kindtest/conformance under the user cache directory)")
	fs.IntVar(&o.nice, "nice", 10, "niceness of the e2e compile (0: none)")
	fs.BoolVar(&o.buildOnly, "build-only", false, "build the binaries and images, create no cluster")
	fs.DurationVar(&o.timeout, "timeout", 6*time.Hour, "ginkgo's time limit for each of the two runs")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// A bad expression is refused now, not after the e2e.test build.
	if _, err := selectSpecs(nil, o.focus, o.skip); err != nil {
		return o, err
	}
	if o.workers < 0 || o.parallel < 1 {
		return o, errors.New("-workers must be 0 or more and -parallel 1 or more")
	}
	if o.cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("cache directory: %w (set -cache-dir)", err)
		}
		o.cacheDir = filepath.Join(base, "kindtest", "conformance")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindtest-conformance:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l := log.New(os.Stderr, "", log.Ltime)
	total, err := run(ctx, l, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindtest-conformance:", err)
		os.Exit(1)
	}
	if total.Failed > 0 {
		os.Exit(1)
	}
}

// findModule returns the nested module conformance/ of the kindtest
// checkout around the working directory or this source file.
func findModule() (string, error) {
	root, searched, ok := images.FindCheckout(filepath.Join("conformance", "go.mod"))
	if !ok {
		return "", fmt.Errorf("kindtest-conformance runs from a kindtest checkout: no conformance/go.mod above %q", searched)
	}
	return filepath.Join(root, "conformance"), nil
}
