package images

import (
	"context"

	"github.com/kindtest/kindtest/internal/docker"
)

// replaceImage runs build, which gives ref to a new image, then removes
// the image ref named before, now without a name: each rebuild of a small
// image under the same tag (the reaper's, the registry's, the load
// balancer's, once their binary changes) would otherwise leave the old
// one dangling on the user's engine. An old image that has other names,
// or that a container still uses (the engine refuses with a conflict),
// stays; any other failure to remove it is logged, not returned: the new
// image is built.
func replaceImage(ctx context.Context, cli *docker.Client, ref string, logger Logger, build func() error) error {
	old, err := cli.InspectImage(ctx, ref)
	if err != nil && !docker.IsNotFound(err) {
		return err
	}
	if err := build(); err != nil {
		return err
	}
	if old.ID == "" {
		return nil
	}
	img, err := cli.InspectImage(ctx, ref)
	if err != nil || img.ID == old.ID {
		return err
	}
	// Removed by ID, an image with one name left loses it: look first.
	if old, err = cli.InspectImage(ctx, old.ID); err != nil || named(old.Tags) {
		return nil
	}
	if err := cli.RemoveImage(ctx, old.ID); err != nil && !docker.IsConflict(err) {
		logger.Printf("the image %s replaced as %s stays: %v", old.ID, ref, err)
	}
	return nil
}

// named says whether tags hold a name (podman lists "<none>:<none>" for
// an image without one).
func named(tags []string) bool {
	for _, t := range tags {
		if t != "<none>:<none>" {
			return true
		}
	}
	return false
}
