package main

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/kindtest"
)

// benchImage is the image LoadImage is timed with: one layer of random
// (incompressible) bytes.
const benchImage = "kindtest/bench-payload:dev"

func bench(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	runs := fs.Int("runs", 5, "clusters to create and delete per size")
	sizes := fs.String("workers", "0,2", "comma-separated worker counts to measure")
	payload := fs.Int("load-mb", 50, "size of the image LoadImage is timed with, in MB (0: skip)")
	settle := fs.Duration("settle", 30*time.Second, "wait after Ready before measuring memory at rest (0: skip)")
	noStorage := fs.Bool("without-storage", false, "create the clusters WithoutStorage (no default StorageClass)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *runs < 1 {
		return usageError{"bench: -runs must be at least 1"}
	}
	var workers []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return usageError{fmt.Sprintf("bench: -workers: %q is not a worker count", s)}
		}
		workers = append(workers, n)
	}
	if *payload > 0 {
		if err := buildPayload(ctx, *payload); err != nil {
			return err
		}
	}
	for _, w := range workers {
		phases := map[string][]time.Duration{}
		var order []string
		add := func(phase string, d time.Duration) {
			if _, ok := phases[phase]; !ok {
				order = append(order, phase)
			}
			phases[phase] = append(phases[phase], d)
		}
		var memory []uint64
		for i := range *runs {
			fmt.Fprintf(out, "1+%d nodes, run %d/%d\n", w, i+1, *runs)
			start := time.Now()
			opts := []kindtest.Option{kindtest.WithWorkers(w)}
			if *noStorage {
				opts = append(opts, kindtest.WithoutStorage())
			}
			c, err := kindtest.New(ctx, opts...)
			if err != nil {
				return err
			}
			total := time.Since(start)
			for _, p := range c.Timings() {
				add(p.Phase, p.Duration)
			}
			add("total: New to Ready", total)
			if *payload > 0 && i == 0 || *payload > 0 && w > 0 {
				t := time.Now()
				err := c.LoadImage(ctx, benchImage)
				if err != nil {
					c.Delete(ctx)
					return err
				}
				add(fmt.Sprintf("LoadImage %d MB", *payload), time.Since(t))
			}
			if *settle > 0 && i == 0 {
				select {
				case <-time.After(*settle):
				case <-ctx.Done():
				}
				var sum uint64
				for _, n := range c.Nodes() {
					m, err := n.MemoryUsage(ctx)
					if err != nil {
						c.Delete(ctx)
						return err
					}
					sum += m
				}
				memory = append(memory, sum)
			}
			t := time.Now()
			if err := c.Delete(ctx); err != nil {
				return err
			}
			add("delete", time.Since(t))
		}
		fmt.Fprintf(out, "\n1 control plane + %d worker(s), %d run(s):\n", w, *runs)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "phase\tmin\tmedian\tmax\t")
		for _, p := range order {
			d := phases[p]
			slices.Sort(d)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", p, round(d[0]), round(d[len(d)/2]), round(d[len(d)-1]))
		}
		tw.Flush()
		for _, m := range memory {
			fmt.Fprintf(out, "memory at rest (%v after Ready, all nodes): %d MiB\n", *settle, m>>20)
		}
		fmt.Fprintln(out)
	}
	return nil
}

func round(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

// buildPayload builds benchImage with mb megabytes of random bytes.
func buildPayload(ctx context.Context, mb int) error {
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		df := []byte("FROM scratch\nCOPY payload /payload\n")
		err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
		if err == nil {
			_, err = tw.Write(df)
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: "payload", Mode: 0o644, Size: int64(mb) << 20})
		}
		if err == nil {
			_, err = io.CopyN(tw, rand.Reader, int64(mb)<<20)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return dc.BuildImage(ctx, pr, docker.BuildSpec{Tags: []string{benchImage}}, nil)
}
