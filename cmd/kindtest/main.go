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
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/reaper"
	"github.com/kindtest/kindtest/kindtest"
)

const usage = `usage: kindtest <command> [flags]

commands:
  build            build the node and reaper images (skipped when up to date;
                   -kubernetes-version vX.Y.Z for another Kubernetes)
  list             list clusters with their owner and age
  delete NAME...   delete clusters
  prune [-all]     delete clusters whose owning process is gone (-all: every cluster)
  logs NAME        export a cluster's logs (-dir, default .)
  bench            create and delete clusters, printing per-phase timings
  reaper           (internal) remove a test session's clusters once it is gone
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "kindtest: %v\n\n%s", err, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "kindtest: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command"}
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "build":
		return build(ctx, args, out)
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
	case "reaper":
		return runReaper(ctx, args)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
	}
	return nil
}

func build(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	version := fs.String("kubernetes-version", images.DefaultKubernetesVersion, "Kubernetes version of the node image, vMAJOR.MINOR.PATCH")
	if err := parse(fs, args); err != nil {
		return err
	}
	logger := log.New(out, "", log.Ltime)
	res, err := images.Build(ctx, images.WithLogger(logger), images.WithKubernetesVersion(*version))
	if err != nil {
		return err
	}
	if err := images.BuildReaper(ctx, images.WithLogger(logger)); err != nil {
		return err
	}
	fmt.Fprintf(out, "node image: %s (%s)\n", res.Image, res.ContentImage)
	return nil
}

func list(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	if err := parse(fs, args); err != nil {
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
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"delete: name at least one cluster (see `kindtest list`)"}
	}
	var errs []error
	for _, name := range fs.Args() {
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
	if err := parse(fs, args); err != nil {
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
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"logs: name one cluster (see `kindtest list`)"}
	}
	c, err := kindtest.Attach(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	defer c.Close()
	path, err := c.ExportLogs(ctx, *dir)
	if path != "" {
		fmt.Fprintf(out, "logs of %s in %s\n", fs.Arg(0), path)
	}
	return err
}

func runReaper(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reaper", flag.ContinueOnError)
	session := fs.String("session", "", "session label of the clusters clients may register")
	listen := fs.String("listen", ":7770", "address to accept clients on")
	first := fs.Duration("first-client", 20*time.Second, "how long to wait for the first client before exiting, having removed nothing")
	if err := parse(fs, args); err != nil {
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
		Session: *session, FirstClient: *first,
		Logf: log.New(os.Stderr, "", log.LstdFlags).Printf,
	})
}
