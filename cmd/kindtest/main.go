// Command kindtest manages kindtest clusters and node images from the shell:
// build the node image, list clusters with their owner and age, delete one,
// prune those whose owner is gone, export a cluster's logs, and measure
// cluster creation.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lb"
	"github.com/kindtest/kindtest/internal/reaper"
	"github.com/kindtest/kindtest/kindtest"
)

const usage = `usage: kindtest <command> [flags]

commands:
  build            build the node, reaper, registry and load-balancer images (skipped when up to date;
                   -kubernetes-version vX.Y.Z for another Kubernetes;
                   --push REGISTRY/PATH/node:TAG pushes all four to a registry)
  image save -o FILE [REF...]
                   write the node, reaper, registry and load-balancer images to one archive file
  image load FILE  load such a file into the engine
  list             list clusters with their owner and age
  delete NAME...   delete clusters
  prune [-all]     delete clusters whose owning process is gone (-all: every cluster)
  logs NAME        export a cluster's logs (-dir, default .)
  bench            create and delete clusters, printing per-phase timings
  reaper           (internal) remove the clusters of test processes once they are gone
  lb               (internal) relay TCP connections to a cluster's control planes
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	var ue usageError
	var help helpRequested
	var code exitCode
	switch {
	case errors.As(err, &code):
		os.Exit(int(code))
	case errors.As(err, &help):
		fmt.Fprint(os.Stdout, help.text)
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "%s\n\n%s", errorLine(err), usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine prefixes err with the command's name, once: the library's
// errors already start with it.
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "kindtest: ") {
		return msg
	}
	return "kindtest: " + msg
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// helpRequested is a subcommand's -h: its flags, printed on standard
// output, and a zero exit.
type helpRequested struct{ text string }

func (h helpRequested) Error() string { return h.text }

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command"}
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "build":
		return build(ctx, args, out)
	case "image":
		return imageCmd(ctx, args, out)
	case "list", "ls":
		return list(ctx, args, out)
	case "delete", "rm":
		return del(ctx, args, out)
	case "prune":
		return prune(ctx, args, out)
	case "logs":
		return logs(ctx, args, out)
	case "bench":
		return bench(ctx, args, out)
	case "pool":
		return pool(ctx, args, out)
	case "reaper":
		return runReaper(ctx, args)
	case "lb":
		return runLoadBalancer(ctx, args)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// parse parses a subcommand's flags wherever they stand among its
// arguments (`logs NAME -dir D` as well as `logs -dir D NAME`; the flag
// package alone stops at the first non-flag) and returns the others, in
// order. After "--" everything is an argument.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var rest []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			fmt.Fprintf(&b, "usage: kindtest %s [flags]\n\nflags:\n", fs.Name())
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return nil, helpRequested{b.String()}
		} else if err != nil {
			return nil, usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
		}
		left := fs.Args()
		if consumed := len(args) - len(left); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// parseNoArgs is parse for a subcommand that takes flags only.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	rest, err := parse(fs, args)
	if err == nil && len(rest) > 0 {
		err = usageError{fmt.Sprintf("%s: unexpected argument %q: it takes flags only", fs.Name(), rest[0])}
	}
	return err
}

func build(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	version := fs.String("kubernetes-version", images.DefaultKubernetesVersion, "Kubernetes version of the node image, vMAJOR.MINOR.PATCH")
	push := fs.String("push", "", "after building, push the node image as this registry reference, and the reaper and registry images beside it")
	platformList := fs.String("platform", "", "build for these platforms, comma-separated ("+strings.Join(images.Platforms, ",")+"); default: the engine's")
	inEngine := fs.Bool("in-engine", false, "make the Debian root file systems in a builder container on the engine (FROM "+images.DebianImage+"), as on a host without Linux or mmdebstrap")
	stock := fs.Bool("stock", false, "build Kubernetes as released, without kindtest's timing patches; the node image is tagged kindtest/node:VERSION"+images.StockSuffix+" (use it with KINDTEST_IMAGE)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *push != "" && docker.RegistryHost(*push) == "" {
		return usageError{fmt.Sprintf("build: --push %q: want a registry reference, HOST[:PORT]/PATH/node:TAG, such as registry.example.com/kindtest/node:%s", *push, *version)}
	}
	platforms, err := parsePlatforms(*platformList)
	if err != nil {
		return err
	}
	logger := log.New(out, "", log.Ltime)
	var results []images.Result
	for _, platform := range platforms {
		opts := []images.BuildOption{images.WithLogger(logger)}
		if *inEngine {
			opts = append(opts, images.WithInEngine())
		}
		if *stock {
			opts = append(opts, images.WithStockKubernetes())
		}
		if platform != "" {
			opts = append(opts, images.WithPlatform(platform))
		}
		res, err := images.Build(ctx, append(opts, images.WithKubernetesVersion(*version))...)
		if err != nil {
			return err
		}
		// The node image's build asked the engine for its platform; the
		// images beside it take the answer from its result.
		beside := append(opts, images.WithPlatformOf(res))
		for _, build := range []func(context.Context, ...images.BuildOption) error{images.BuildReaper, images.BuildRegistry, images.BuildLoadBalancer} {
			if err := build(ctx, beside...); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "node image for %s: %s (%s)\n", res.Platform, res.Image, res.ContentImage)
		results = append(results, res)
	}
	switch {
	case *push == "":
		return nil
	case len(results) == 1:
		return pushImages(ctx, results[0], *push, out)
	default:
		return pushMultiPlatform(ctx, results, *push, out)
	}
}

// parsePlatforms splits -platform's list and checks each platform (see
// images.ParsePlatform), without repeats; no list is one build for the
// engine's platform ("").
func parsePlatforms(list string) ([]string, error) {
	if list == "" {
		return []string{""}, nil
	}
	var platforms []string
	for _, item := range strings.Split(list, ",") {
		p, err := images.ParsePlatform(strings.TrimSpace(item))
		if err != nil {
			return nil, usageError{fmt.Sprintf("build: -platform: %v (comma-separated for several)", err)}
		}
		if !slices.Contains(platforms, p) {
			platforms = append(platforms, p)
		}
	}
	return platforms, nil
}

func list(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cs, err := kindtest.List(ctx)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		fmt.Fprintln(out, "no clusters")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNODES\tAGE\tOWNER\tOWNER ALIVE\tKEEP\tSESSION")
	for _, c := range cs {
		age := "?"
		if !c.Created.IsZero() {
			age = time.Since(c.Created).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%t\t%s\t%s\n", c.Name, c.Nodes, age, c.Owner, c.OwnerAlive, c.Keep, c.Session)
	}
	return tw.Flush()
}

func del(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	names, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageError{"delete: name at least one cluster (see `kindtest list`)"}
	}
	var errs []error
	for _, name := range names {
		if err := kindtest.DeleteCluster(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "deleted %s\n", name)
	}
	return errors.Join(errs...)
}

func prune(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	all := fs.Bool("all", false, "delete every cluster, not only those whose owner is gone")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	scope := kindtest.PruneOrphans
	if *all {
		scope = kindtest.PruneAll
	}
	names, err := kindtest.Prune(ctx, scope)
	for _, n := range names {
		fmt.Fprintf(out, "deleted %s\n", n)
	}
	if len(names) == 0 && err == nil {
		fmt.Fprintln(out, "nothing to prune")
	}
	return err
}

func logs(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	dir := fs.String("dir", ".", "directory to write the logs under")
	names, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageError{"logs: name one cluster (see `kindtest list`)"}
	}
	c, err := kindtest.Attach(ctx, names[0])
	if err != nil {
		return err
	}
	defer c.Close()
	path, err := c.ExportLogs(ctx, *dir)
	if path != "" {
		fmt.Fprintf(out, "logs of %s in %s\n", names[0], path)
	}
	return err
}

func runReaper(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reaper", flag.ContinueOnError)
	listen := fs.String("listen", ":7770", "address to accept clients on")
	idle := fs.Duration("idle", 5*time.Second, "how long to wait without any client before exiting")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	return reaper.Serve(ctx, dc, ln, reaper.Config{
		Idle: *idle,
		Logf: log.New(os.Stderr, "", log.LstdFlags).Printf,
	})
}

func runLoadBalancer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lb", flag.ContinueOnError)
	listen := fs.String("listen", ":6443", "address to accept clients on")
	backends := fs.String("backends", "", "comma-separated HOST:PORT backends")
	var forwards forwardFlag
	fs.Var(&forwards, "forward", "LISTEN=HOST:PORT,HOST:PORT... : balance another address (repeatable; instead of -listen and -backends)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if len(forwards) == 0 {
		if *backends == "" {
			return usageError{"lb: -backends or -forward is required"}
		}
		forwards = append(forwards, forward{*listen, strings.Split(*backends, ",")})
	}
	logf := log.New(os.Stderr, "", log.LstdFlags).Printf
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(forwards))
	for _, f := range forwards {
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return err
		}
		go func() { errs <- lb.Serve(ctx, ln, lb.Config{Backends: f.backends, Logf: logf}) }()
	}
	// The first balancer to end ends the others.
	err := <-errs
	cancel()
	return err
}

// forward is one -forward of the lb subcommand.
type forward struct {
	listen   string
	backends []string
}

type forwardFlag []forward

func (f *forwardFlag) String() string { return fmt.Sprint(*f) }

func (f *forwardFlag) Set(v string) error {
	listen, backends, ok := strings.Cut(v, "=")
	if !ok || listen == "" || backends == "" {
		return fmt.Errorf("%q: want LISTEN=HOST:PORT[,HOST:PORT...]", v)
	}
	*f = append(*f, forward{listen, strings.Split(backends, ",")})
	return nil
}
