// Command kindcompare measures kind against kindtest side by side on this
// machine, with no container registry: it builds kind v0.33.0's CLI from
// the Go module proxy, kind's base image from kind's own images/base
// (FROM a Debian bookworm made with mmdebstrap, with containerd, runc,
// crictl and the CNI plugins built from their Go modules), and a kind
// node image for Kubernetes v1.37.2 from kindtest's stock binaries. Then
// it creates one-node clusters in turn, kind then kindtest, and prints
// the time from the start of creation to a ready cluster (the API server
// ready, every node Ready, the default service account, every CoreDNS
// replica ready: kindtest's own definition) with the median, minimum and
// maximum of each side.
//
// Run it from the tools module, as root (it adds a firewall rule while it
// measures, see rejectServiceTraffic), on a host with mmdebstrap, gcc and
// libseccomp-dev; the stock binaries come from
// `go run ./cmd/kindtest build -stock`, which it runs when they are
// missing. With kindtest's default and stock node images:
//
//	cd tools && go run ./kindcompare -pairs 6 -warmup 1 -kindtest-images ",kindtest/node:v1.37.2-stock"
//
// What it builds is cached: binaries under the cache directory, images
// tagged kindtest-kind/...:<tag>-<hash of their inputs>. Every cluster it
// creates is deleted, on failure and on Ctrl-C too, and so is the Docker
// network its kind clusters use. What it substitutes for images kind
// pulls, and why, is in docs/performance.md ("Side by side with kind").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "kindcompare:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	pairs          int
	warmup         int
	kindtestImages []string // "" is kindtest's default node image
	buildOnly      bool
	quiet          time.Duration
	quietLimit     time.Duration
	cacheDir       string
	repo           string
}

func parseFlags() (options, error) {
	var o options
	var images string
	cache, err := os.UserCacheDir()
	if err != nil {
		return o, err
	}
	flag.IntVar(&o.pairs, "pairs", 5, "measured rounds, each one kind cluster then one kindtest cluster per -kindtest-images entry")
	flag.IntVar(&o.warmup, "warmup", 1, "rounds run first and not counted")
	flag.StringVar(&images, "kindtest-images", "", "comma-separated node images kindtest is measured with, each in every round (empty entry: kindtest's default image)")
	flag.DurationVar(&o.quiet, "quiet", 15*time.Second, "before each run, wait until no other user's cluster has run on the engine for this long")
	flag.DurationVar(&o.quietLimit, "quiet-limit", 30*time.Minute, "wait no longer than this for -quiet, then measure anyway (the run's line names the clusters seen)")
	flag.BoolVar(&o.buildOnly, "build-only", false, "build kind and its images, measure nothing")
	flag.StringVar(&o.cacheDir, "cache", filepath.Join(cache, "kindtest", "kindcompare"), "where built binaries and scratch files go")
	flag.StringVar(&o.repo, "repo", "", "the kindtest repository (default: found from the working directory)")
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	if o.pairs < 1 || o.warmup < 0 {
		return o, errors.New("-pairs must be at least 1 and -warmup at least 0")
	}
	o.kindtestImages = strings.Split(images, ",")
	if o.repo == "" {
		if o.repo, err = findRepo(); err != nil {
			return o, err
		}
	}
	return o, nil
}

func run(ctx context.Context) error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.cacheDir, 0o755); err != nil {
		return err
	}
	if err := exec.CommandContext(ctx, "docker", "version").Run(); err != nil {
		return fmt.Errorf("no Docker engine answers (docker version: %w)", err)
	}
	b := &builder{cacheDir: o.cacheDir, repo: o.repo}
	nodeImage, err := b.build(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("kind node image: %s\n", nodeImage)
	if o.buildOnly {
		return nil
	}
	return compare(ctx, o, b, nodeImage)
}

// findRepo returns the kindtest repository holding the working directory:
// the first directory upwards whose go.mod is kindtest's.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/kindtest/kindtest\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the kindtest repository: run from it or pass -repo")
		}
		dir = parent
	}
}

// command runs name with args in dir, its output kept for the error.
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out, 4000))
	}
	return string(out), nil
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
