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

// ListImageIDs returns the IDs of every image, named or not, that carries
// all the given labels.
func (c *Client) ListImageIDs(ctx context.Context, labels map[string]string) ([]string, error) {
	list, err := c.api.ImageList(ctx, image.ListOptions{All: true, Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list images labelled %v: %w", labels, err)
	}
	var ids []string
	for _, img := range list {
		if hasLabels(img.Labels, labels) {
			ids = append(ids, img.ID)
		}
	}
	return ids, nil
}
