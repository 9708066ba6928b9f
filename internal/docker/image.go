package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
)

// Image is what kindtest needs to know of an image.
type Image struct {
	ID     string
	Tags   []string
	Labels map[string]string
	Size   int64
	// Platform is "os/arch" or "os/arch/variant", as ctr's --platform takes it.
	Platform string
}

// InspectImage describes an image; IsNotFound(err) when there is none.
func (c *Client) InspectImage(ctx context.Context, ref string) (Image, error) {
	info, err := c.api.ImageInspect(ctx, ref)
	if err != nil {
		return Image{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	out := Image{ID: info.ID, Tags: info.RepoTags, Size: info.Size, Platform: info.Os + "/" + info.Architecture}
	if info.Variant != "" {
		out.Platform += "/" + info.Variant
	}
	if info.Config != nil {
		out.Labels = info.Config.Labels
	}
	return out, nil
}

// BuildSpec describes an image build from a context tar stream.
type BuildSpec struct {
	Tags       []string
	Dockerfile string
	BuildArgs  map[string]string
	Labels     map[string]string
	// Platform is the image's "os/arch"; "" means the engine's own. An
	// image FROM another inherits that image's platform on engines older
	// than 23.0, whatever this says: give the base the right one first.
	Platform string
}

// BuildImage builds an image with the engine's builder, writing the
// builder's progress to progress (nil discards it).
func (c *Client) BuildImage(ctx context.Context, contextTar io.Reader, spec BuildSpec, progress io.Writer) error {
	args := make(map[string]*string, len(spec.BuildArgs))
	for k, v := range spec.BuildArgs {
		args[k] = &v
	}
	resp, err := c.api.ImageBuild(ctx, contextTar, build.ImageBuildOptions{
		Tags:        spec.Tags,
		Dockerfile:  spec.Dockerfile,
		BuildArgs:   args,
		Labels:      spec.Labels,
		Platform:    spec.Platform,
		Remove:      true,
		ForceRemove: true,
	})
	if err != nil {
		return fmt.Errorf("build image %v: %w", spec.Tags, err)
	}
	defer resp.Body.Close()
	if progress == nil {
		progress = io.Discard
	}
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, progress, 0, false, nil); err != nil {
		return fmt.Errorf("build image %v: %w", spec.Tags, err)
	}
	return nil
}

// ImportImage makes a one-layer image from a root file system tar stream,
// applying Dockerfile instructions in changes (ENV, ENTRYPOINT, ...).
func (c *Client) ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error {
	return c.ImportImageFor(ctx, rootfs, ref, "", changes)
}

// ImportImageFor is ImportImage for a root file system of the platform
// ("linux/arm64"; "" is the engine's own). Engines before 23.0 label an
// import with their own architecture whatever the request says; such an
// image is relabelled (see SetImagePlatform), so that the images built
// FROM it, and the containers run from those, carry the right one.
func (c *Client) ImportImageFor(ctx context.Context, rootfs io.Reader, ref, platform string, changes []string) error {
	rc, err := c.api.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref, image.ImportOptions{Changes: changes, Platform: platform})
	if err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	defer rc.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil); err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	if platform == "" {
		return nil
	}
	return c.SetImagePlatform(ctx, ref, platform)
}

// SaveImages streams images as a `docker save` tar archive.
func (c *Client) SaveImages(ctx context.Context, refs []string) (io.ReadCloser, error) {
	rc, err := c.api.ImageSave(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("save images %v: %w", refs, err)
	}
	return rc, nil
}

// TagImage gives an image another reference.
func (c *Client) TagImage(ctx context.Context, source, target string) error {
	if err := c.api.ImageTag(ctx, source, target); err != nil {
		return fmt.Errorf("tag image %s as %s: %w", source, target, err)
	}
	return nil
}

// RemoveImage removes an image reference; one that does not exist counts as
// removed.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	if _, err := c.api.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
