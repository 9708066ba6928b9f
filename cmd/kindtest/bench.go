package main

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
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
	parallel := fs.Int("parallel", 1, "clusters created at once in each run, as by that many test processes")
	jsonPath := fs.String("json", "", "append one JSON line per cluster created to this file")
	noStorage := fs.Bool("without-storage", false, "create the clusters WithoutStorage (no default StorageClass)")
	noPolicy := fs.Bool("without-network-policy", false, "create the clusters WithoutNetworkPolicy (no NetworkPolicy agent)")
	slowLogs := fs.Duration("logs-slower-than", 0, "export the logs of a cluster whose New to Ready took longer than this, before deleting it (0: never)")
	logsDir := fs.String("logs-dir", "bench-logs", "where -logs-slower-than writes them")
	poolSize := fs.Int("pool", 0, "claim each cluster from a pool of this many made in the background (kindtest pool): the times are the claims'; the pool's own creations are not timed (0: create each one)")
	withTimeline := fs.Bool("timeline", false, "print when each step of creation happened (phase ends, systemd units, pod sandboxes and containers, the components' first log lines, kubeadm's phases), median over the runs; the engine must be on this host")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *runs < 1 {
		return usageError{"bench: -runs must be at least 1"}
	}
	if *parallel < 1 || *parallel > 8 {
		return usageError{"bench: -parallel must be between 1 and 8"}
	}
	var workers []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return usageError{fmt.Sprintf("bench: -workers: %q is not a worker count", s)}
		}
		workers = append(workers, n)
	}
	var jsonOut io.Writer = io.Discard
	if *jsonPath != "" {
		f, err := os.OpenFile(*jsonPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		jsonOut = f
	}
	if *payload > 0 {
		if err := buildPayload(ctx, *payload); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "load average at start: %s\n", loadAverage())
	image, patches := benchNodeImage(ctx)
	fmt.Fprintf(out, "node image: %s (Kubernetes timing patches: %s)\n", image, patches)
	for _, w := range workers {
		st := &benchStats{phases: map[string][]time.Duration{}}
		tls := &timelineStats{}
		var pool *kindtest.Pool
		if *poolSize > 0 {
			var err error
			if pool, err = startBenchPool(ctx, *poolSize, w, *noStorage, *noPolicy); err != nil {
				return err
			}
		}
		for i := range *runs {
			if pool != nil {
				if err := pool.WaitReady(ctx, *parallel); err != nil {
					return errors.Join(err, pool.Close(context.Background()))
				}
			}
			fmt.Fprintf(out, "1+%d nodes, run %d/%d", w, i+1, *runs)
			if *parallel > 1 {
				fmt.Fprintf(out, ", %d clusters at once", *parallel)
			}
			fmt.Fprintln(out)
			err := concurrent.Each(*parallel, func(j int) error {
				r := benchRun{Time: time.Now().UTC(), Workers: w, Run: i + 1, Parallel: *parallel, Load: loadAverage(), Image: image, Patches: patches}
				opt := benchOptions{payloadMB: *payload, settle: *settle, slowLogs: *slowLogs, logsDir: *logsDir, timeline: *withTimeline, pool: pool != nil}
				if *noStorage {
					opt.options = append(opt.options, kindtest.WithoutStorage())
				}
				if *noPolicy {
					opt.options = append(opt.options, kindtest.WithoutNetworkPolicy())
				}
				// Memory is measured once per size, in the first run's
				// first cluster, and LoadImage timed once for one node.
				opt.measureMemory = i == 0 && j == 0 && *settle > 0
				opt.loadImage = *payload > 0 && (i == 0 || w > 0) && j == 0
				if err := benchOne(ctx, &r, opt); err != nil {
					return err
				}
				st.add(r)
				if r.Timeline != nil {
					tls.add(r.timeline())
				}
				line, _ := json.Marshal(r)
				st.mu.Lock()
				defer st.mu.Unlock()
				_, err := fmt.Fprintf(jsonOut, "%s\n", line)
				return err
			})
			if err != nil {
				if pool != nil {
					err = errors.Join(err, pool.Close(context.Background()))
				}
				return err
			}
		}
		if pool != nil {
			if err := pool.Close(context.Background()); err != nil {
				return err
			}
			name, _, _ := strings.Cut(pool.Env(), "=")
			os.Unsetenv(name)
			fmt.Fprintf(out, "\nclaimed from a pool of %d:", *poolSize)
		}
		fmt.Fprintf(out, "\n1 control plane + %d worker(s), %d run(s) x %d at once; load average now %s:\n", w, *runs, *parallel, loadAverage())
		st.print(out)
		if *withTimeline {
			fmt.Fprintln(out)
			tls.print(out)
		}
		for _, m := range st.memory {
			fmt.Fprintf(out, "memory at rest (%v after Ready, all nodes): %d MiB\n", *settle, m)
		}
		fmt.Fprintln(out)
	}
	return nil
}

// startBenchPool starts a pool of the bench's clusters in this process, and
// points this process's New at it.
func startBenchPool(ctx context.Context, size, workers int, noStorage, noPolicy bool) (*kindtest.Pool, error) {
	opts := []kindtest.Option{kindtest.WithWorkers(workers)}
	if noStorage {
		opts = append(opts, kindtest.WithoutStorage())
	}
	if noPolicy {
		opts = append(opts, kindtest.WithoutNetworkPolicy())
	}
	p, err := kindtest.NewPool(ctx, kindtest.PoolConfig{Size: size}, opts...)
	if err != nil {
		return nil, err
	}
	name, id, _ := strings.Cut(p.Env(), "=")
	os.Setenv(name, id)
	return p, nil
}

// benchRun is one cluster created, measured and deleted: one JSON line.
type benchRun struct {
	Time     time.Time `json:"time"`
	Workers  int       `json:"workers"`
	Run      int       `json:"run"`
	Parallel int       `json:"parallel"`
	Load     string    `json:"load_average"`
	// Image is the node image, and Patches the timing patches its
	// Kubernetes carries (see benchNodeImage).
	Image    string                     `json:"image"`
	Patches  string                     `json:"kubernetes_patches"`
	Cluster  string                     `json:"cluster"`
	PhasesMS map[kindtest.Phase]float64 `json:"phases_ms"`
	// Order keeps the phases in the order they ran; PhasesMS is a map.
	Order     []kindtest.Phase `json:"phase_order"`
	ReadyMS   float64          `json:"ready_ms"`
	LoadMS    float64          `json:"load_image_ms,omitempty"`
	DeleteMS  float64          `json:"delete_ms"`
	MemoryMiB uint64           `json:"memory_mib,omitempty"`
	// Timeline is when each step of creation happened, in ms since New
	// (bench -timeline).
	Timeline map[string]float64 `json:"timeline_ms,omitempty"`
	// LogsDir holds the cluster's logs when it was slower than
	// -logs-slower-than.
	LogsDir string `json:"logs_dir,omitempty"`
}

type benchOptions struct {
	pool          bool // claimed from a pool (-pool)
	payloadMB     int
	settle        time.Duration
	measureMemory bool
	loadImage     bool
	// options are given to kindtest.New after WithWorkers.
	options []kindtest.Option
	// slowLogs, when set, is the New to Ready time past which the
	// cluster's logs go to logsDir before it is deleted, to find out what
	// made a run slow.
	slowLogs time.Duration
	logsDir  string
	// timeline, when set, has the run's timeline taken before the cluster
	// is deleted.
	timeline bool
}

// timeline is r's Timeline as durations.
func (r benchRun) timeline() timeline {
	tl := timeline{}
	for name, v := range r.Timeline {
		tl[name] = time.Duration(v * float64(time.Millisecond))
	}
	return tl
}

// benchOne creates one cluster, takes its measures into r and deletes it.
func benchOne(ctx context.Context, r *benchRun, opt benchOptions) error {
	start := time.Now()
	log := &timelineLogger{start: start}
	c, err := kindtest.New(ctx, append([]kindtest.Option{kindtest.WithWorkers(r.Workers), kindtest.WithLogger(log)}, opt.options...)...)
	if err != nil {
		return err
	}
	ready := time.Since(start)
	if opt.pool {
		// Under a pool, the log says how the cluster was had: claimed
		// (and where the claim's time went) or made cold, and why.
		log.mu.Lock()
		for _, l := range log.lines {
			if strings.Contains(l.line, "pool") {
				fmt.Fprintf(os.Stderr, "  %s\n", l.line)
			}
		}
		log.mu.Unlock()
	}
	if opt.timeline {
		tl := timeline{}
		log.events(tl)
		if err := nodeTimeline(ctx, c.ControlPlane(), start, tl); err != nil {
			return errors.Join(err, c.Delete(ctx))
		}
		r.Timeline = map[string]float64{}
		for name, d := range tl {
			r.Timeline[name] = ms(d)
		}
	}
	r.ReadyMS = ms(ready)
	r.Cluster = c.Name()
	if opt.slowLogs > 0 && ready > opt.slowLogs {
		path, err := c.ExportLogs(ctx, opt.logsDir)
		if err != nil {
			return errors.Join(fmt.Errorf("export logs of slow cluster %s: %w", c.Name(), err), c.Delete(ctx))
		}
		r.LogsDir = path
	}
	r.PhasesMS = map[kindtest.Phase]float64{}
	for _, p := range c.Timings() {
		r.PhasesMS[p.Phase] = ms(p.Duration)
		r.Order = append(r.Order, p.Phase)
	}
	if opt.loadImage {
		t := time.Now()
		if err := c.LoadImage(ctx, benchImage); err != nil {
			return errors.Join(err, c.Delete(ctx))
		}
		r.LoadMS = ms(time.Since(t))
	}
	if opt.measureMemory {
		select {
		case <-time.After(opt.settle):
		case <-ctx.Done():
		}
		for _, n := range c.Nodes() {
			m, err := n.MemoryUsage(ctx)
			if err != nil {
				return errors.Join(err, c.Delete(ctx))
			}
			r.MemoryMiB += m >> 20
		}
	}
	t := time.Now()
	if err := c.Delete(ctx); err != nil {
		return err
	}
	r.DeleteMS = ms(time.Since(t))
	return nil
}

// benchStats gathers the runs of one size: a row per phase, by its name,
// then rows of bench's own measures.
type benchStats struct {
	mu     sync.Mutex
	order  []string
	phases map[string][]time.Duration
	memory []uint64
}

func (s *benchStats) add(r benchRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	put := func(phase string, v float64) {
		if _, ok := s.phases[phase]; !ok {
			s.order = append(s.order, phase)
		}
		s.phases[phase] = append(s.phases[phase], time.Duration(v*float64(time.Millisecond)))
	}
	for _, p := range r.Order {
		put(string(p), r.PhasesMS[p])
	}
	put("total: New to Ready", r.ReadyMS)
	if r.LoadMS > 0 {
		put("LoadImage", r.LoadMS)
	}
	put("delete", r.DeleteMS)
	if r.MemoryMiB > 0 {
		s.memory = append(s.memory, r.MemoryMiB)
	}
}

func (s *benchStats) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tn\tmin\tp50\tp95\tp99\tmax\t")
	for _, p := range s.order {
		d := slices.Clone(s.phases[p])
		slices.Sort(d)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", p, len(d), round(d[0]),
			round(percentile(d, 0.50)), round(percentile(d, 0.95)), round(percentile(d, 0.99)), round(d[len(d)-1]))
	}
	tw.Flush()
}

// percentile is the nearest-rank percentile of sorted values: the
// smallest value at or below which a fraction q of them lie.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// loadAverage is the host's 1, 5 and 15 minute load averages, or "?" where
// /proc/loadavg is not there (the engine may be elsewhere: this is the
// test process's host).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
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

// benchNodeImage returns the node image the clusters are made from
// (KINDTEST_IMAGE, else the default), and the timing patches its label
// lists: "none" for a stock build, "?" when the engine does not have the
// image or it has no such label (built before the label existed).
func benchNodeImage(ctx context.Context) (image, patches string) {
	image = kindtest.Image()
	cli, err := docker.New(ctx)
	if err != nil {
		return image, "?"
	}
	defer cli.Close()
	img, err := cli.InspectImage(ctx, image)
	if err != nil {
		return image, "?"
	}
	return image, cmp.Or(img.Labels[lifetime.LabelImageKubernetesPatches], "?")
}
