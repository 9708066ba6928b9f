package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// builder holds the state of one cold build.
type builder struct {
	cfg *buildConfig
	cli *docker.Client
	res Result
	// platform is the target of the build.
	platform platform
	binDir   string
	// deriveKubernetes is set when the version to build is not the one
	// the checked-in images/kubernetes module requires.
	deriveKubernetes bool
	// components are the images kubeadm expects, as it names them.
	components []string
	// patches are the names of the timing patches the Kubernetes
	// binaries were built with.
	patches []string
}

func (b *builder) run(ctx context.Context) error {
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"build binaries (go build)", b.buildBinaries},
		{"base images (mmdebstrap)", b.baseImages},
		{"component images", b.componentImages},
		{"node image", b.nodeImage},
		{"preload component images into containerd", b.preload},
	}
	if err := b.checkHostEmulation(ctx); err != nil {
		return err
	}
	for i, s := range steps {
		start := time.Now()
		b.cfg.logger.Printf("node image step %d/%d: %s", i+1, len(steps), s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		b.cfg.logger.Printf("node image step %d/%d: %s done in %s", i+1, len(steps), s.name, time.Since(start).Round(100*time.Millisecond))
	}
	if err := b.cli.TagImage(ctx, b.res.ContentImage, b.res.Image); err != nil {
		return err
	}
	// The committed image keeps the intermediate's layers; only the name goes.
	if err := b.cli.RemoveImage(ctx, b.buildRef()); err != nil {
		return err
	}
	return b.pruneOlderImages(ctx)
}

// pruneOlderImages removes the node images of the same Kubernetes version
// built from other inputs, so that rebuilds do not fill the disk. One that
// a container still uses stays.
func (b *builder) pruneOlderImages(ctx context.Context) error {
	refs, err := b.cli.ListImageTags(ctx, "kindtest/node")
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if !sameSeries(ref, b.res.Image) || ref == b.res.ContentImage {
			continue
		}
		switch err := b.cli.RemoveImage(ctx, ref); {
		case docker.IsConflict(err):
			b.cfg.logger.Printf("  kept older node image %s: in use", ref)
		case err != nil:
			return err
		default:
			b.cfg.logger.Printf("  removed older node image %s", ref)
		}
	}
	return nil
}

// sameSeries reports whether ref is a content-tagged node image of the
// plain reference plain: plain, a dash and a hash. Those of other
// platforms ("kindtest/node:v1.37.2-arm64-<hash>" beside
// "kindtest/node:v1.37.2") are another series.
func sameSeries(ref, plain string) bool {
	hash, ok := strings.CutPrefix(ref, plain+"-")
	if !ok || len(hash) != hashLength {
		return false
	}
	return strings.Trim(hash, "0123456789abcdef") == ""
}

// checkHostEmulation makes sure, before anything is built, that this
// machine can make the root file systems still missing for a target of
// another architecture (see checkEmulation).
func (b *builder) checkHostEmulation(ctx context.Context) error {
	if b.cfg.rootfsInEngine() {
		return nil // the engine's machine runs them: see checkEngineRuns
	}
	for _, r := range []rootfs{nodeBase, kubeProxyBase} {
		ref, _, err := r.ref(b.cfg.sourceDir, b.platform)
		if err != nil {
			return err
		}
		if _, err := b.cli.InspectImage(ctx, ref); docker.IsNotFound(err) {
			return checkEmulation(b.platform)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// buildLabels are the labels of what a build leaves running while it
// runs: the build's short hash and this process as its owner, so that
// sweepBuilds removes what a killed build left and leaves alone what a
// build running beside this one (another platform, another cache
// directory) is using.
func (b *builder) buildLabels() map[string]string {
	self, _ := os.Hostname()
	start, _ := lifetime.ProcessStart(os.Getpid())
	return map[string]string{
		lifetime.LabelBuild:      b.res.ContentHash[:hashLength],
		lifetime.LabelOwnerHost:  self,
		lifetime.LabelOwnerPID:   strconv.Itoa(os.Getpid()),
		lifetime.LabelOwnerStart: start,
	}
}

// sweepBuilds removes the containers and volumes of builds whose process
// is gone (or that name no owner, as builds before owner labels did), and
// this build's own.
func (b *builder) sweepBuilds(ctx context.Context) error {
	anyBuild := map[string]string{lifetime.LabelBuild: ""}
	containers, err := b.cli.ListContainers(ctx, anyBuild)
	if err != nil {
		return err
	}
	volumes, err := b.cli.ListVolumes(ctx, anyBuild)
	if err != nil {
		return err
	}
	labelSets := make([]map[string]string, 0, len(containers)+len(volumes))
	for _, c := range containers {
		labelSets = append(labelSets, c.Labels)
	}
	for _, v := range volumes {
		labelSets = append(labelSets, v.Labels)
	}
	own := b.res.ContentHash[:hashLength]
	gone := map[string]bool{}
	for _, l := range labelSets {
		id := l[lifetime.LabelBuild]
		pid, _ := strconv.Atoi(l[lifetime.LabelOwnerPID])
		if id == own || pid <= 0 || !lifetime.OwnerAlive(l[lifetime.LabelOwnerHost], pid, l[lifetime.LabelOwnerStart]) {
			gone[id] = true
		}
	}
	var errs []error
	for id := range gone {
		if id == "" {
			continue
		}
		errs = append(errs, b.cli.RemoveLabelled(ctx, map[string]string{lifetime.LabelBuild: id}))
	}
	return errors.Join(errs...)
}
