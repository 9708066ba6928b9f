package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// kindConfig is the configuration of every kind cluster measured.
//
//go:embed kind-config.yaml
var kindConfig string

// kindNetwork is the Docker network kind's nodes join here (kind's
// KIND_EXPERIMENTAL_DOCKER_NETWORK), removed at the end: kind itself
// keeps its network "kind" for ever.
const kindNetwork = "kindcompare"

// readyTimeout bounds one cluster's creation.
const readyTimeout = 5 * time.Minute

// sample is one cluster's measure: the side it was made by, and the time
// from the start of creation to ready. For kind, created is when `kind
// create cluster` returned.
type sample struct {
	side           string
	round          int
	warmup         bool
	ready, created time.Duration
	// load is the load average when the run started; others are the
	// nodes of other users' clusters seen running meanwhile.
	load   string
	others []string
}

func compare(ctx context.Context, o options, b *builder, nodeImage string) (err error) {
	kt := filepath.Join(o.cacheDir, "bin", "kindtest")
	if _, err := command(ctx, o.repo, []string{"GOWORK=off"}, "go", "build", "-o", kt, "./cmd/kindtest"); err != nil {
		return err
	}
	cfg := filepath.Join(o.cacheDir, "kind-config.yaml")
	if err := os.WriteFile(cfg, []byte(kindConfig), 0o644); err != nil {
		return err
	}
	if undo, err := rejectServiceTraffic(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	} else {
		defer undo()
	}
	defer func() {
		// kind leaves its network when the last cluster goes
		nerr := cleanupCommand(nil, "docker", "network", "rm", kindNetwork)
		if nerr != nil && !strings.Contains(nerr.Error(), "No such network") && !strings.Contains(nerr.Error(), "not found") {
			err = errors.Join(err, nerr)
		}
	}()

	start := time.Now().UTC()
	fmt.Printf("start: %s, load average: %s\n", start.Format(time.RFC3339), loadAverage())
	var samples []sample
	w := &watcher{}
	// measure runs one cluster, after the engine has been quiet, and
	// prints its line.
	measure := func(s sample, fn func() (created, ready time.Duration, err error)) error {
		if err := w.waitQuiet(ctx, o.quiet, o.quietLimit); err != nil {
			return err
		}
		s.load = loadAverage()
		var err error
		s.others, err = w.during(ctx, func() error {
			var err error
			s.created, s.ready, err = fn()
			return err
		})
		if err != nil {
			return fmt.Errorf("%s, round %d: %w", s.side, s.round, err)
		}
		samples = append(samples, s)
		printSample(s, o.warmup)
		return nil
	}
	fmt.Println("round  side  ready (s)  [kind create returned (s)]  load at start  [other clusters seen]")
	for round := 1; round <= o.warmup+o.pairs; round++ {
		warm := round <= o.warmup
		name := fmt.Sprintf("kindcompare-%d", round)
		w.mu.Lock()
		w.kindName = name
		w.mu.Unlock()
		err := measure(sample{side: "kind " + kindVersion, round: round, warmup: warm}, func() (time.Duration, time.Duration, error) {
			return b.kindCluster(ctx, name, nodeImage, cfg)
		})
		if err != nil {
			return err
		}
		for _, image := range o.kindtestImages {
			err := measure(sample{side: kindtestSide(image), round: round, warmup: warm}, func() (time.Duration, time.Duration, error) {
				ready, err := kindtestCluster(ctx, kt, image, w)
				return 0, ready, err
			})
			if err != nil {
				return err
			}
		}
	}
	fmt.Printf("end: %s, load average: %s\n\n", time.Now().UTC().Format(time.RFC3339), loadAverage())
	summarize(os.Stdout, samples)
	return nil
}

// serviceCIDR is the Service range of kind's and kindtest's clusters.
const serviceCIDR = "10.96.0.0/12"

// rejectServiceTraffic makes the host reject, while the comparison runs,
// what containers send to the Service range through it: in a kind node,
// a client of the kubernetes Service (CoreDNS, the local-path provisioner,
// the kindnetd stand-in) that starts before kube-proxy's rules would
// otherwise reach the host's default route, off this machine. The rule
// goes in Docker's DOCKER-USER chain; undo removes it.
func rejectServiceTraffic(ctx context.Context) (undo func(), err error) {
	rule := []string{"DOCKER-USER", "-d", serviceCIDR, "-m", "comment", "--comment", "kindcompare", "-j", "REJECT"}
	if _, err := command(ctx, "", nil, "iptables", append([]string{"-I"}, rule...)...); err != nil {
		return nil, fmt.Errorf("cannot keep Service traffic on this host: %w", err)
	}
	return func() {
		if err := cleanupCommand(nil, "iptables", append([]string{"-D"}, rule...)...); err != nil {
			fmt.Fprintf(os.Stderr, "warning: %v\n", err)
		}
	}, nil
}

func printSample(s sample, warmup int) {
	round := fmt.Sprint(s.round - warmup)
	if s.warmup {
		round = "warm-up"
	}
	line := fmt.Sprintf("%s  %s  %.1f", round, s.side, s.ready.Seconds())
	if s.created > 0 {
		line += fmt.Sprintf("  [%.1f]", s.created.Seconds())
	}
	line += "  load " + s.load
	if len(s.others) > 0 {
		line += "  [other clusters: " + strings.Join(s.others, ", ") + "]"
	}
	fmt.Println(line)
}

func kindtestSide(image string) string {
	if image == "" {
		return "kindtest"
	}
	return "kindtest (" + image + ")"
}

// kindCluster creates a one-node kind cluster, waits until it is ready
// and deletes it, whatever happened.
func (b *builder) kindCluster(ctx context.Context, name, image, cfg string) (created, ready time.Duration, err error) {
	env := []string{"KIND_EXPERIMENTAL_DOCKER_NETWORK=" + kindNetwork}
	kubeconfig := filepath.Join(filepath.Dir(cfg), name+".kubeconfig")
	defer func() {
		derr := cleanupCommand(env, b.kindBin, "delete", "cluster", "--name", name, "--kubeconfig", kubeconfig)
		err = errors.Join(err, derr)
		os.Remove(kubeconfig)
	}()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	start := time.Now()
	if _, err := command(ctx, "", env, b.kindBin, "create", "cluster", "--name", name, "--image", image, "--config", cfg, "--kubeconfig", kubeconfig); err != nil {
		return 0, 0, err
	}
	created = time.Since(start)
	api, err := newAPIClient(kubeconfig)
	if err != nil {
		return 0, 0, err
	}
	var last error
	for {
		if last = api.ready(ctx); last == nil {
			return created, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kindtestCluster times one cluster with `kindtest bench` (New to Ready,
// the cluster deleted after), with image as KINDTEST_IMAGE if not "".
func kindtestCluster(ctx context.Context, kt, image string, w *watcher) (time.Duration, error) {
	f, err := os.CreateTemp("", "kindcompare-*.json")
	if err != nil {
		return 0, err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd := exec.CommandContext(ctx, kt, "bench", "-runs", "1", "-workers", "0", "-load-mb", "0", "-settle", "0", "-json", f.Name())
	// On Ctrl-C, let kindtest delete its cluster.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 2 * time.Minute
	cmd.Env = os.Environ()
	if image != "" {
		cmd.Env = append(cmd.Env, "KINDTEST_IMAGE="+image)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	w.ktPID = cmd.Process.Pid
	w.mu.Unlock()
	err = cmd.Wait()
	w.mu.Lock()
	w.ktPID = 0
	w.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("kindtest bench: %w\n%s", err, tail(out.Bytes(), 4000))
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return 0, err
	}
	var r struct {
		ReadyMS float64 `json:"ready_ms"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &r); err != nil || r.ReadyMS == 0 {
		return 0, fmt.Errorf("kindtest bench wrote no ready_ms: %q", data)
	}
	return time.Duration(r.ReadyMS * float64(time.Millisecond)), nil
}

// apiClient reaches a cluster's API server with a kubeconfig's client
// certificate.
type apiClient struct {
	server string
	http   *http.Client
}

// newAPIClient reads the fields kind writes in a kubeconfig (one cluster,
// one user, base64 data on one line each).
func newAPIClient(kubeconfig string) (*apiClient, error) {
	f, err := os.Open(kubeconfig)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		if ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	decode := func(k string) []byte {
		b, _ := base64.StdEncoding.DecodeString(fields[k])
		return b
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(decode("certificate-authority-data")) {
		return nil, fmt.Errorf("%s: no certificate-authority-data", kubeconfig)
	}
	cert, err := tls.X509KeyPair(decode("client-certificate-data"), decode("client-key-data"))
	if err != nil {
		return nil, fmt.Errorf("%s: client certificate: %w", kubeconfig, err)
	}
	if fields["server"] == "" {
		return nil, fmt.Errorf("%s: no server", kubeconfig)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	return &apiClient{server: fields["server"], http: &http.Client{Transport: tr, Timeout: 5 * time.Second}}, nil
}

func (a *apiClient) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", a.server+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if into == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// ready is kindtest's readiness (kindtest/readiness.go), in its order:
// the API server ready, every node Ready, the default service account,
// and every CoreDNS replica updated and ready.
func (a *apiClient) ready(ctx context.Context) error {
	if err := a.get(ctx, "/readyz", nil); err != nil {
		return err
	}
	var nodes struct {
		Items []struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := a.get(ctx, "/api/v1/nodes", &nodes); err != nil {
		return err
	}
	if len(nodes.Items) == 0 {
		return errors.New("no node registered")
	}
	for _, n := range nodes.Items {
		if !slices.ContainsFunc(n.Status.Conditions, func(c struct{ Type, Status string }) bool {
			return c.Type == "Ready" && c.Status == "True"
		}) {
			return errors.New("a node is not Ready")
		}
	}
	if err := a.get(ctx, "/api/v1/namespaces/default/serviceaccounts/default", nil); err != nil {
		return err
	}
	var dns struct {
		Spec   struct{ Replicas *int } `json:"spec"`
		Status struct {
			ReadyReplicas   int `json:"readyReplicas"`
			UpdatedReplicas int `json:"updatedReplicas"`
		} `json:"status"`
	}
	if err := a.get(ctx, "/apis/apps/v1/namespaces/kube-system/deployments/coredns", &dns); err != nil {
		return err
	}
	want := 1
	if dns.Spec.Replicas != nil {
		want = *dns.Spec.Replicas
	}
	if dns.Status.ReadyReplicas < want || dns.Status.UpdatedReplicas < want {
		return fmt.Errorf("CoreDNS: %d of %d replicas ready", dns.Status.ReadyReplicas, want)
	}
	return nil
}

// cleanupCommand runs a deletion in a context of its own, bounded: never
// the run's context, which Ctrl-C cancels.
func cleanupCommand(env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := command(ctx, "", env, name, args...)
	return err
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
