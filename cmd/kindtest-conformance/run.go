package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/kindtest/kindtest/images"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/kindtest"
)

// defaultNodeImage is the node image a run uses unless told otherwise.
const defaultNodeImage = kindtest.DefaultImage

// run does the whole job and returns the summary of its runs: any spec
// failed when its Failed is not 0.
func run(ctx context.Context, log logger, o options) (total summary, err error) {
	start := time.Now()
	moduleDir, err := findModule()
	if err != nil {
		return summary{}, err
	}
	cli, err := docker.New(ctx)
	if err != nil {
		return summary{}, err
	}
	defer cli.Close()
	version, platform := o.version, ""
	if version == "" || !o.buildOnly {
		nodeVersion, nodePlatform, err := nodeImage(ctx, cli, o.image)
		if err != nil {
			return summary{}, err
		}
		platform = nodePlatform
		if version != "" && version != nodeVersion {
			return summary{}, fmt.Errorf("-kubernetes-version %s, but node image %s is Kubernetes %s: the e2e tests must be the cluster's version (pass -build-only to build them alone)", version, o.image, nodeVersion)
		}
		version = nodeVersion
		log.Printf("node image %s: Kubernetes %s", o.image, version)
	}
	if _, ok := images.ParseRelease(version); !ok {
		return summary{}, fmt.Errorf("Kubernetes version %q is not a release of the form vMAJOR.MINOR.PATCH", version)
	}
	if platform == "" {
		// -build-only without the node image: the engine's platform.
		info, err := cli.Info(ctx)
		if err != nil {
			return summary{}, err
		}
		var ok bool
		if platform, ok = info.Platform(); !ok {
			return summary{}, fmt.Errorf("the engine's architecture %q has no image platform name", info.Architecture)
		}
	}

	bins, err := buildBinaries(ctx, log, moduleDir, o.cacheDir, version, o.nice)
	if err != nil {
		return summary{}, err
	}
	plan, err := planImages(ctx, bins, moduleDir, o.focus, o.skip)
	if err != nil {
		return summary{}, err
	}
	plans := plan.images
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return summary{}, err
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return summary{}, err
	}
	tmp, err := os.MkdirTemp("", "kindtest-conformance-")
	if err != nil {
		return summary{}, err
	}
	defer os.RemoveAll(tmp)
	ib := &imageBuilder{cli: cli, log: log, bins: bins, tmp: tmp, platform: platform,
		sampleModule: filepath.Join(moduleDir, sampleAPIServerDir), nice: o.nice}
	if err := buildImages(ctx, ib, plans); err != nil {
		return summary{}, err
	}
	if o.buildOnly {
		writeImageReport(os.Stdout, plans)
		return summary{}, nil
	}

	cluster, err := kindtest.New(ctx, append([]kindtest.Option{
		kindtest.WithImage(o.image),
		kindtest.WithWorkers(o.workers),
		kindtest.WithControlPlanes(o.controlPlane),
		kindtest.WithNamePrefix("conformance"),
		kindtest.WithLogger(log)},
		mirrorOptions(plans)...)...)
	if err != nil {
		return summary{}, err
	}
	defer func() {
		// Its own context: the run's may be cancelled by now.
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if derr := cluster.Delete(dctx); derr != nil {
			err = errors.Join(err, derr)
		} else {
			log.Printf("cluster %s deleted", cluster.Name())
		}
	}()
	log.Printf("cluster %s: %d control plane(s), %d worker(s)", cluster.Name(), o.controlPlane, o.workers)
	if err := markNodeImages(ctx, cluster, plans); err != nil {
		return summary{}, err
	}
	var load []string
	for _, p := range plans {
		if p.Built {
			load = append(load, p.Ref)
		}
	}
	loadStart := time.Now()
	if err := cluster.LoadImage(ctx, load...); err != nil {
		return summary{}, err
	}
	log.Printf("loaded %d test images into every node in %s", len(load), time.Since(loadStart).Round(100*time.Millisecond))
	if err := pushMirrored(ctx, cli, log, cluster.RegistryAddr(), plans); err != nil {
		return summary{}, err
	}
	writeImageReport(os.Stderr, plans)
	writeMirrorReport(os.Stderr, plan.pullAlways, plans)

	total.Listed = plan.listed
	var reports []string
	phases := []struct {
		name, labels string
		nodes        int
		enabled      bool
	}{
		{"parallel", "Conformance && !Serial", o.parallel, o.parallelRun},
		{"serial", "Conformance && Serial", 1, o.serial},
	}
	var summaries []string
	for _, ph := range phases {
		if !ph.enabled {
			continue
		}
		if err := ctx.Err(); err != nil {
			return summary{}, err
		}
		s, report, rerr := runGinkgo(ctx, log, bins, cluster, o, out, ph.name, ph.labels, ph.nodes)
		if rerr != nil {
			return summary{}, rerr
		}
		reports = append(reports, report)
		var b strings.Builder
		s.write(&b, ph.name)
		summaries = append(summaries, b.String())
		total.add(s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Kubernetes %s conformance on kindtest cluster %s (%s; %d control plane(s), %d worker(s)), focus %q, skip %q\n",
		version, cluster.Name(), o.image, o.controlPlane, o.workers, o.focus, o.skip)
	for _, s := range summaries {
		b.WriteString(s)
	}
	total.Wall = time.Since(start)
	fmt.Fprintf(&b, "total: %d selected, %d ran, %d passed, %d failed, %d skipped at run time; the whole command took %s\n",
		total.Selected, total.Ran, total.Passed, total.Failed, total.Skipped, total.Wall.Round(time.Second))
	if total.Selected != total.Listed {
		fmt.Fprintf(&b, "conformance.yaml lists %d conformance specs for this focus and skip, ginkgo selected %d\n", total.Listed, total.Selected)
	}
	fmt.Fprintf(&b, "JUnit reports: %s\n", strings.Join(reports, ", "))
	writeImageReport(&b, plans)
	writeMirrorReport(&b, plan.pullAlways, plans)
	os.Stdout.WriteString(b.String())
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(b.String()), 0o644); err != nil {
		return summary{}, err
	}
	return total, nil
}

// nodeImage reads the Kubernetes version the node image is labelled
// with, and its platform.
func nodeImage(ctx context.Context, cli *docker.Client, ref string) (version, platform string, err error) {
	img, err := cli.InspectImage(ctx, ref)
	if docker.IsNotFound(err) {
		return "", "", fmt.Errorf("node image %s not found: build it with `go run ./cmd/kindtest build` (or pass -image)", ref)
	}
	if err != nil {
		return "", "", err
	}
	for _, key := range []string{lifetime.LabelImageKubernetesVersion, lifetime.LegacyLabelImageKubernetesVersion} {
		if v := img.Labels[key]; v != "" {
			return v, img.Platform, nil
		}
	}
	return "", "", fmt.Errorf("node image %s has no %s label: is it a kindtest node image?", ref, lifetime.LabelImageKubernetesVersion)
}

// runGinkgo runs one ginkgo pass over e2e.test and summarises its JUnit
// report.
func runGinkgo(ctx context.Context, log logger, bins binaries, cluster *kindtest.Cluster, o options, out, name, labels string, nodes int) (summary, string, error) {
	report := filepath.Join(out, "junit-"+name+".xml")
	os.Remove(report)
	args := ginkgoArgs(o, labels, nodes, report)
	args = append(args, bins.path("e2e.test"), "--")
	args = append(args, e2eArgs(cluster.KubeconfigPath(), bins.path("kubectl"), filepath.Join(out, name), o.workers)...)
	logPath := filepath.Join(out, "ginkgo-"+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return summary{}, "", err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "%s %s\n", bins.path("ginkgo"), strings.Join(args, " "))
	log.Printf("running the %s conformance specs (%s): ginkgo output in %s", name, labels, logPath)
	cmd := exec.CommandContext(ctx, bins.path("ginkgo"), args...)
	cmd.Dir = out
	cmd.Stdout = io.MultiWriter(logFile, os.Stdout)
	cmd.Stderr = cmd.Stdout
	// Ctrl-C reaches ginkgo too (one process group); a cancel from
	// elsewhere interrupts it the same way, and kills it if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	if ctx.Err() != nil {
		return summary{}, "", fmt.Errorf("%s run interrupted after %s: %w", name, wall.Round(time.Second), ctx.Err())
	}
	s, err := readJUnit(report)
	if err != nil {
		return summary{}, "", fmt.Errorf("%s run: ginkgo wrote no usable report (%v): %w", name, runErr, err)
	}
	s.Wall = wall
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		return summary{}, "", fmt.Errorf("%s run: %w", name, runErr)
	}
	log.Printf("%s run: %d ran, %d passed, %d failed in %s", name, s.Ran, s.Passed, s.Failed, wall.Round(time.Second))
	return s, report, nil
}

// ginkgoArgs are ginkgo's flags for one pass: the conformance label
// filter of the pass, the user's focus and skip, and the JUnit report.
// The report path is absolute: ginkgo's --output-dir, not given, would
// be joined in front of it.
func ginkgoArgs(o options, labels string, nodes int, report string) []string {
	args := []string{
		"--nodes=" + fmt.Sprint(nodes),
		"--label-filter=" + labels,
		"--timeout=" + o.timeout.String(),
		"--junit-report=" + report,
		"--silence-skips",
		"--no-color",
		"--poll-progress-after=10m",
	}
	if o.focus != "" {
		args = append(args, "--focus="+o.focus)
	}
	if o.skip != "" {
		args = append(args, "--skip="+o.skip)
	}
	return args
}

// e2eArgs are e2e.test's own flags, as kind's CI passes them.
func e2eArgs(kubeconfig, kubectl, reportDir string, workers int) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--provider=skeleton",
		"--kubectl-path=" + kubectl,
		"--report-dir=" + reportDir,
		"--disable-log-dump=true",
	}
	if workers > 0 {
		args = append(args, fmt.Sprintf("--num-nodes=%d", workers))
	}
	return args
}

// runPlan is what planImages decides before anything is built.
type runPlan struct {
	images []imagePlan
	// listed is how many conformance specs conformance.yaml lists for
	// the focus and skip.
	listed int
	// pullAlways are the selected specs that pull with Always: when there
	// are any, the images their files name are mirrored (Mirror).
	pullAlways []conformanceSpec
}

// planImages decides, for every image the conformance specs name, how it
// is made: from the e2e framework's image list (manifest.go and
// e2e.test --list-images) and the conformance spec files that name each;
// and which images the cluster's registry serves, for the specs that pull
// with Always.
func planImages(ctx context.Context, bins binaries, moduleDir, focus, skip string) (runPlan, error) {
	manifest, err := os.ReadFile(filepath.Join(bins.kubernetesDir, "test", "utils", "image", "manifest.go"))
	if err != nil {
		return runPlan{}, err
	}
	refs, err := exec.CommandContext(ctx, bins.path("e2e.test"), "--list-images").Output()
	if err != nil {
		return runPlan{}, fmt.Errorf("e2e.test --list-images: %w", err)
	}
	list, err := os.ReadFile(filepath.Join(bins.kubernetesDir, "test", "conformance", "testdata", "conformance.yaml"))
	if err != nil {
		return runPlan{}, err
	}
	configs := matchRefs(parseManifest(manifest), string(refs))
	var ids []string
	for _, c := range configs {
		ids = append(ids, c.ID)
	}
	all := parseConformanceList(list)
	specs, err := selectSpecs(all, focus, skip)
	if err != nil {
		return runPlan{}, err
	}
	if len(specs) == 0 {
		return runPlan{}, fmt.Errorf("-focus %q and -skip %q select none of the %d conformance specs of Kubernetes %s (test/conformance/testdata/conformance.yaml)", focus, skip, len(all), bins.version)
	}
	users, err := imageUsers(bins.kubernetesDir, specs, ids)
	if err != nil {
		return runPlan{}, err
	}
	// The kubectl specs apply the testing manifests, whose templates
	// name images of their own.
	var templated []string
	if slices.ContainsFunc(specs, func(s conformanceSpec) bool { return strings.HasPrefix(s.File, "test/e2e/kubectl/") }) {
		if templated, err = manifestTemplateImages(bins.kubernetesDir, ids); err != nil {
			return runPlan{}, err
		}
	}
	agnhostVersion, err := os.ReadFile(filepath.Join(bins.kubernetesDir, "test", "images", "agnhost", "VERSION"))
	if err != nil {
		return runPlan{}, err
	}
	nnpVersion, err := os.ReadFile(filepath.Join(bins.kubernetesDir, "test", "images", "nonewprivs", "VERSION"))
	if err != nil {
		return runPlan{}, err
	}
	sampleAPIServer, err := images.RequiredVersion(filepath.Join(moduleDir, sampleAPIServerDir, "go.mod"), sampleAPIServerModule)
	if err != nil {
		return runPlan{}, err
	}
	src := sourceVersions{agnhost: strings.TrimSpace(string(agnhostVersion)), nonewprivs: strings.TrimSpace(string(nnpVersion)), sampleAPIServer: sampleAPIServer}
	plans := decide(configs, users, templated, src, bins.version)
	pullAlways, err := pullAlwaysSpecs(bins.kubernetesDir, specs)
	if err != nil {
		return runPlan{}, err
	}
	markMirrored(plans, pullAlways)
	return runPlan{images: plans, listed: len(specs), pullAlways: pullAlways}, nil
}

// alwaysNeeded are the images the e2e framework itself runs, whatever
// the specs (agnhost's exec pods, the pods' sandboxes). BusyBox, which
// its pod helpers default to, is needed by the spec files that call them
// (namedImages).
var alwaysNeeded = []string{"Agnhost", "Pause"}

// sourceVersions are the versions of the test images' sources: in the
// module (test/images/NAME/VERSION), and the k8s.io/sample-apiserver
// that conformance/sample-apiserver requires.
type sourceVersions struct{ agnhost, nonewprivs, sampleAPIServer string }

// decide makes the plan for each image the conformance specs need: those
// named in a conformance spec file or a manifest template, and the
// framework's own.
func decide(configs []imageConfig, users map[string][]fileUse, templated []string, src sourceVersions, kubernetesVersion string) []imagePlan {
	agnhostVersion, nonewprivsVersion := src.agnhost, src.nonewprivs
	var plans []imagePlan
	for _, c := range configs {
		if c.Ref == "" || (len(users[c.ID]) == 0 && !slices.Contains(templated, c.ID) && !slices.Contains(alwaysNeeded, c.ID)) {
			continue
		}
		p := imagePlan{imageConfig: c, Users: users[c.ID]}
		switch c.Name {
		case "agnhost":
			switch {
			case c.ID == "AgnhostPrivate":
				p.How = "an image the specs pull from a private registry with credentials; nothing here serves it"
			case c.Version == agnhostVersion:
				p.Built, p.Faithful = true, true
				p.How = fmt.Sprintf("agnhost %s from k8s.io/kubernetes@%s test/images/agnhost, on Debian bookworm instead of Alpine, without the CoreDNS 1.6.2 binary and the fake registry's files", agnhostVersion, kubernetesVersion)
			default:
				// No Kubernetes release may hold this agnhost (2.55 is in
				// none: v1.33 has 2.53, v1.34 2.56); the specs want an
				// agnhost that is another image than the current one.
				p.Built, p.StandInFor = true, "agnhost:"+agnhostVersion
				p.How = fmt.Sprintf("a stand-in: agnhost %s (this module's) under the %s tag", agnhostVersion, c.Version)
			}
		case "busybox":
			p.Built, p.Faithful = true, true
			p.How = "BusyBox " + busyboxVersion + " built from its release tarball"
		case "pause", "etcd":
			p.How = "kubeadm's image, in the node image (checked once the cluster is up)"
		case "nginx":
			p.Built = true
			p.How = "a stand-in: Debian bookworm's nginx-light (nginx 1.22), not nginx " + strings.SplitN(c.Version, "-", 2)[0]
		case "nonewprivs":
			if c.Version == nonewprivsVersion {
				p.Built, p.Faithful = true, true
				p.How = fmt.Sprintf("nonewprivs %s from k8s.io/kubernetes@%s test/images/nonewprivs, on Debian bookworm instead of Alpine", c.Version, kubernetesVersion)
			} else {
				p.How = fmt.Sprintf("nonewprivs %s: the source of k8s.io/kubernetes@%s is %s", c.Version, kubernetesVersion, nonewprivsVersion)
			}
		case "kitten", "nautilus":
			// This module's sources are a later release (1.9, 1.9.0)
			// of the same pictures on a later agnhost.
			p.Built = true
			p.How = fmt.Sprintf("a stand-in: agnhost %s with test/images/%s/html of k8s.io/kubernetes@%s, as its Dockerfile builds it, under the %s tag", agnhostVersion, c.Name, kubernetesVersion, c.Version)
		case "glibc-dns-testing":
			p.Built, p.Faithful = true, true
			p.How = "Debian bookworm with dnsutils, as its Dockerfile builds it, without the CoreDNS 1.5.0 binary the probes do not use"
		case "nonroot":
			p.Built = true
			p.How = "Debian bookworm with USER 1234, as the nonroot Dockerfile of this Kubernetes version (1.6.0) builds it, not " + c.Version + "'s"
		case "sample-apiserver":
			if want := sampleAPIServerVersion(c.Version); want == src.sampleAPIServer {
				p.Built, p.Faithful = true, true
				p.How = fmt.Sprintf("%s %s from the Go module proxy (conformance/%s), static, at /sample-apiserver as upstream's Dockerfile lays it out, on a minimal root file system instead of Alpine", sampleAPIServerModule, want, sampleAPIServerDir)
			} else {
				p.How = fmt.Sprintf("sample-apiserver %s is %s %s; conformance/%s builds %s", c.Version, sampleAPIServerModule, want, sampleAPIServerDir, src.sampleAPIServer)
			}
		case "alpine":
			if strings.HasPrefix(c.Ref, "invalid.") {
				p.Faithful, p.InNode = true, true
				p.How = "an image that must not exist: the spec expects its pull to fail"
			}
		}
		if p.How == "" {
			p.How = "not built by kindtest-conformance yet (upstream: test/images/" + c.Name + ")"
		}
		plans = append(plans, p)
	}
	return plans
}

// buildImages builds the images the plans say are built. A BusyBox of
// another release than the tag's is kept, as a substitute.
func buildImages(ctx context.Context, ib *imageBuilder, plans []imagePlan) error {
	ib.log.Printf("building the test images")
	for i, p := range plans {
		if !p.Built {
			continue
		}
		var err error
		switch p.Name {
		case "agnhost":
			if p.StandInFor != "" {
				continue // tagged below, once the image it stands in for is built
			}
			err = ib.agnhost(ctx, p.Ref)
		case "busybox":
			var release string
			release, err = ib.busybox(ctx, p.Ref)
			if want, _, _ := strings.Cut(p.Version, "-"); err == nil && release != want {
				plans[i].Faithful = false
				plans[i].How = fmt.Sprintf("a stand-in: BusyBox %s built from its release tarball, not %s", release, want)
			} else if err == nil {
				plans[i].How = fmt.Sprintf("BusyBox %s built from its release tarball (defconfig, static)", release)
			}
		case "nginx":
			err = ib.nginx(ctx, p.Ref)
		case "nonroot":
			err = ib.nonroot(ctx, p.Ref)
		case "nonewprivs":
			err = ib.nonewprivs(ctx, p.Ref)
		case "glibc-dns-testing":
			err = ib.glibcDNSTesting(ctx, p.Ref)
		case "kitten", "nautilus":
			err = ib.webImage(ctx, p.Ref, p.Name)
		case "sample-apiserver":
			err = ib.sampleAPIServer(ctx, p.Ref)
		}
		if err != nil {
			return fmt.Errorf("build %s: %w", p.Ref, err)
		}
	}
	for _, p := range plans {
		if p.StandInFor == "" {
			continue
		}
		from := ""
		for _, q := range plans {
			if q.StandInFor == "" && strings.HasSuffix(q.Ref, "/"+p.StandInFor) {
				from = q.Ref
			}
		}
		if from == "" {
			return fmt.Errorf("stand-in %s: no image %s was built", p.Ref, p.StandInFor)
		}
		if err := ib.cli.TagImage(ctx, from, p.Ref); err != nil {
			return err
		}
		ib.log.Printf("  %s tagged as a stand-in for it: %s", from, p.Ref)
	}
	return nil
}

// markNodeImages checks that the images the plans expect in the node
// image (kubeadm's pause and etcd) are there.
func markNodeImages(ctx context.Context, cluster *kindtest.Cluster, plans []imagePlan) error {
	res, err := cluster.ControlPlane().Exec(ctx, "ctr", "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		return err
	}
	have := strings.Fields(res.Stdout)
	for i, p := range plans {
		if p.Name != "pause" && p.Name != "etcd" {
			continue
		}
		if slices.Contains(have, p.Ref) {
			plans[i].InNode, plans[i].Faithful = true, true
			plans[i].How = "kubeadm's image, in the node image"
		} else {
			plans[i].How = "expected in the node image, but its containerd has no " + p.Ref
		}
	}
	return nil
}

// writeImageReport lists the images that were not built faithfully, with
// the spec files that name them.
func writeImageReport(w io.Writer, plans []imagePlan) {
	var ok, unmet []string
	for _, p := range plans {
		if p.unmet() {
			unmet = append(unmet, p.describe())
		} else {
			ok = append(ok, p.Ref)
		}
	}
	fmt.Fprintf(w, "test images in place (%d): %s\n", len(ok), strings.Join(ok, ", "))
	if len(unmet) > 0 {
		fmt.Fprintf(w, "test images missing or stand-ins (%d); specs that need them fail or test the stand-in:\n", len(unmet))
		for _, u := range unmet {
			fmt.Fprintf(w, "  %s\n", u)
		}
	}
}
