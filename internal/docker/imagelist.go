package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// ListImageTags returns every "repo:tag" reference of the images in
// repository repo (for example "kindtest/node").
func (c *Client) ListImageTags(ctx context.Context, repo string) ([]string, error) {
	list, err := c.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil {
		return nil, fmt.Errorf("list images of %s: %w", repo, err)
	}
	var refs []string
	for _, img := range list {
		refs = append(refs, img.RepoTags...)
	}
	return refs, nil
}
