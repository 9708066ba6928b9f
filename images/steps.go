package images

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// builder holds the state of one cold build.
type builder struct {
	cfg    *buildConfig
	cli    *docker.Client
	res    Result
	binDir string
	// deriveKubernetes is set when the version to build is not the one
	// the checked-in images/kubernetes module requires.
	deriveKubernetes bool
	// components are the images kubeadm expects, as it names them.
	components []string
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
	prefix := "kindtest/node:" + b.res.KubernetesVersion + "-"
	for _, ref := range refs {
		if !strings.HasPrefix(ref, prefix) || ref == b.res.ContentImage {
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
