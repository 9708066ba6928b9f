package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// exitCode ends the command with a code of its own: pool's is its
// command's.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// shapeFlags are the options of the clusters a command makes, as flags.
type shapeFlags struct {
	workers, controlPlanes                                      int
	image, prefix, config                                       string
	noKubernetes, noStorage, noPolicy, noLoadBalancer, registry bool
}

func (s *shapeFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&s.workers, "workers", 0, "worker nodes (WithWorkers)")
	fs.IntVar(&s.controlPlanes, "control-planes", 1, "control-plane nodes (WithControlPlanes)")
	fs.StringVar(&s.image, "image", "", "node image (WithImage; default KINDTEST_IMAGE, else the library's)")
	fs.StringVar(&s.prefix, "prefix", "", "cluster name prefix (WithNamePrefix; default kt)")
	fs.StringVar(&s.config, "config", "", "a kind cluster configuration file (WithKindConfigFile)")
	fs.BoolVar(&s.noKubernetes, "without-kubernetes", false, "nodes only (WithoutKubernetes)")
	fs.BoolVar(&s.noStorage, "without-storage", false, "no default StorageClass (WithoutStorage)")
	fs.BoolVar(&s.noPolicy, "without-network-policy", false, "no NetworkPolicy agent (WithoutNetworkPolicy)")
	fs.BoolVar(&s.noLoadBalancer, "without-load-balancer", false, "LoadBalancer Services get no address (WithoutLoadBalancer)")
	fs.BoolVar(&s.registry, "registry", false, "a registry for the cluster (WithRegistry)")
}

func (s *shapeFlags) options() []kindtest.Option {
	var opts []kindtest.Option
	if s.config != "" {
		opts = append(opts, kindtest.WithKindConfigFile(s.config))
	}
	if s.workers != 0 {
		opts = append(opts, kindtest.WithWorkers(s.workers))
	}
	if s.controlPlanes != 1 {
		opts = append(opts, kindtest.WithControlPlanes(s.controlPlanes))
	}
	if s.image != "" {
		opts = append(opts, kindtest.WithImage(s.image))
	}
	if s.prefix != "" {
		opts = append(opts, kindtest.WithNamePrefix(s.prefix))
	}
	for _, o := range []struct {
		set bool
		opt kindtest.Option
	}{
		{s.noKubernetes, kindtest.WithoutKubernetes()},
		{s.noStorage, kindtest.WithoutStorage()},
		{s.noPolicy, kindtest.WithoutNetworkPolicy()},
		{s.noLoadBalancer, kindtest.WithoutLoadBalancer()},
		{s.registry, kindtest.WithRegistry()},
	} {
		if o.set {
			opts = append(opts, o.opt)
		}
	}
	return opts
}

// pool runs a command while a pool of ready clusters is kept for it: New
// and Start in the command's processes claim them.
func pool(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pool", flag.ContinueOnError)
	n := fs.Int("n", 2, fmt.Sprintf("clusters kept ready (1 to %d)", kindtest.MaxPoolSize))
	parallel := fs.Int("parallel", 0, "clusters made at once (0: -n, at most one per CPU)")
	total := fs.Int("total", 0, "the most clusters made in all, replacements included (0: no limit); say how many the command needs and none is made in vain")
	var shape shapeFlags
	shape.register(fs)
	cmdArgs, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(cmdArgs) == 0 {
		return usageError{"pool: no command: kindtest pool [flags] -- go test ./..."}
	}
	if _, err := exec.LookPath(cmdArgs[0]); err != nil {
		return fmt.Errorf("pool: command %q: %w", cmdArgs[0], err)
	}
	logger := log.New(os.Stderr, "", log.Ltime)
	p, err := kindtest.NewPool(ctx, kindtest.PoolConfig{Size: *n, Parallel: *parallel, Total: *total}, append(shape.options(), kindtest.WithLogger(logger))...)
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, out, os.Stderr
	cmd.Env = append(os.Environ(), p.Env())
	runErr := cmd.Start()
	if runErr == nil {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case runErr = <-done:
		case <-ctx.Done():
			// The terminal's Ctrl-C reached the command too; a SIGTERM
			// to the pool is passed on. The command cleans up its
			// clusters, then the pool its own.
			_ = cmd.Process.Signal(syscall.SIGTERM)
			runErr = <-done
		}
	}
	logger.Printf("kindtest: pool %s: the command ended after %v", p.ID(), time.Since(start).Round(time.Millisecond))
	closeErr := p.Close(context.Background())
	var ee *exec.ExitError
	switch {
	case errors.As(runErr, &ee):
		if closeErr != nil {
			fmt.Fprintln(os.Stderr, errorLine(closeErr))
		}
		return exitCode(ee.ExitCode())
	case runErr != nil:
		return errors.Join(fmt.Errorf("pool: %w", runErr), closeErr)
	}
	return closeErr
}
