package images

import (
	"context"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// buildBinaryImage builds ref for platform p from dockerfile (FROM
// scratch) with one binary, bin here, in its context as name, labelled
// with sum, the binary's SHA-256. An image already tagged ref with that
// label and platform is up to date: it returns false and builds nothing.
// A rebuild removes the image ref named before (see replaceImage).
func buildBinaryImage(ctx context.Context, cli *docker.Client, logger Logger, ref, dockerfile, name, bin, sum string, p platform) (bool, error) {
	old, err := cli.InspectImage(ctx, ref)
	if err == nil && old.Labels[lifetime.LabelImageBinaryHash] == sum && old.Platform == p.String() {
		return false, nil
	}
	if err != nil && !docker.IsNotFound(err) {
		return false, err
	}
	tarStream := contextTar([]tarFile{
		{name: "Dockerfile", data: []byte(dockerfile), mode: 0o644},
		{name: name, path: bin, mode: 0o755},
	})
	defer tarStream.Close()
	return true, replaceImage(ctx, cli, ref, old.ID, logger, func() error {
		return cli.BuildImage(ctx, tarStream, docker.BuildSpec{
			Tags:     []string{ref},
			Labels:   map[string]string{lifetime.LabelImageBinaryHash: sum},
			Platform: p.String(),
		}, nil)
	})
}

// replaceImage runs build, which gives ref to a new image, then removes
// oldID, the image ref named before ("" for none), now without a name:
// each rebuild of an image under the same tag (the reaper's, the
// registry's, the load balancer's, the node image's component images,
// once their binary changes) would otherwise leave the old one dangling
// on the user's engine. An old image that has other names,
// or that a container still uses (the engine refuses with a conflict),
// stays; any other failure to remove it is logged, not returned: the new
// image is built.
func replaceImage(ctx context.Context, cli *docker.Client, ref, oldID string, logger Logger, build func() error) error {
	if err := build(); err != nil {
		return err
	}
	if oldID == "" {
		return nil
	}
	img, err := cli.InspectImage(ctx, ref)
	if err != nil || img.ID == oldID {
		return err
	}
	// Removed by ID, an image with one name left loses it: look first.
	if old, err := cli.InspectImage(ctx, oldID); err != nil || named(old.Tags) {
		return nil
	}
	if err := cli.RemoveImage(ctx, oldID); err != nil && !docker.IsConflict(err) {
		logger.Printf("the image %s replaced as %s stays: %v", oldID, ref, err)
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
