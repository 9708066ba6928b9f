package kindtest

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// imageIDLabel is the containerd label LoadImage puts on the images it
// imports into a node: the image's ID (config digest) in the engine, so
// that a later load of the same image skips that node.
const imageIDLabel = lifetime.LabelImageID

// LoadImage copies images from the host's engine into the containerd of
// every node, streaming one `docker save` to all nodes at once with no
// temporary file, so that pods with imagePullPolicy Never or IfNotPresent
// run them. A node that already has every image, with the same image ID
// under the same name (loaded by kindtest before), is skipped: loading
// the same image again costs one exec per node.
//
// Only the nodes' platform is imported. Under the containerd image store
// (Docker Desktop, Docker 29's default) `docker save` writes an image's
// whole index while only the pulled platform's content exists, and an
// import that walks every platform fails on the first missing one
// (kind#3795).
func (c *Cluster) LoadImage(ctx context.Context, refs ...string) error {
	return c.LoadImageOn(ctx, c.nodes, refs...)
}

// LoadImageOn is LoadImage into the given nodes of the cluster only, for
// example to test a pod that must be scheduled where its image is. A node
// of another cluster is an error.
func (c *Cluster) LoadImageOn(ctx context.Context, nodes []*Node, refs ...string) error {
	if len(refs) == 0 {
		return errors.New("load image: no image named")
	}
	targets, err := c.ownNodes(nodes)
	if err != nil {
		return fmt.Errorf("load image %s: %w", strings.Join(refs, ", "), err)
	}
	imgs := make([]archiveImage, 0, len(refs))
	for _, ref := range refs {
		img, err := c.docker.InspectImage(ctx, ref)
		if err != nil {
			return fmt.Errorf("load image %s: not in the host engine (build or pull it first): %w", ref, err)
		}
		imgs = append(imgs, namedInArchive(ref, img.ID, img.Tags))
	}
	return c.load(ctx, targets, strings.Join(refs, ", "), imgs, func(missing []archiveImage) (io.ReadCloser, error) {
		names := make([]string, len(missing))
		for i, m := range missing {
			names[i] = m.ref
		}
		return c.docker.SaveImages(ctx, names)
	})
}

// LoadImageArchive loads the images of an image archive file (written by
// `docker save`, or an OCI layout tar; gzip-compressed or not) into every
// node, as LoadImage does: nodes that have every image of the archive
// already are skipped.
func (c *Cluster) LoadImageArchive(ctx context.Context, path string) error {
	imgs, err := scanArchive(path)
	if err != nil {
		return fmt.Errorf("load image archive: %w", err)
	}
	return c.load(ctx, c.nodes, path, imgs, func([]archiveImage) (io.ReadCloser, error) {
		return os.Open(path)
	})
}

// ownNodes checks that every node is one of this cluster's, and returns
// the cluster's own handles for them, without duplicates.
func (c *Cluster) ownNodes(nodes []*Node) ([]*Node, error) {
	if len(nodes) == 0 {
		return nil, errors.New("no node given")
	}
	var out []*Node
	seen := map[*Node]bool{}
	for _, n := range nodes {
		if n == nil {
			return nil, errors.New("a nil node was given")
		}
		var own *Node
		for _, o := range c.nodes {
			if o.id == n.id && o.name == n.name {
				own = o
			}
		}
		if own == nil {
			return nil, fmt.Errorf("node %s is not a node of cluster %s (its nodes: %s)", n.name, c.name, c.nodeNames())
		}
		if !seen[own] {
			seen[own] = true
			out = append(out, own)
		}
	}
	return out, nil
}

func (c *Cluster) nodeNames() string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.name
	}
	return strings.Join(names, ", ")
}

// archiveImage is one image of an archive: its reference, and its ID
// (config digest) when known.
type archiveImage struct {
	ref, id string
	// archived is the containerd name the engine's archive gives the
	// image where it is not ref's own, "" where it is: podman files an
	// image loaded from a `docker save` archive under "localhost/"
	// (localhost/kindtest/echo:dev), answers to kindtest/echo:dev, and
	// saves it under its own name, which a pod's kindtest/echo:dev
	// (docker.io/kindtest/echo:dev) does not find.
	archived string
}

// namedInArchive is image id, asked for as ref, whose names in the engine
// are tags, as the engine's archive of it names it. Only an image
// imported under a name can be found again by it (not one named by ID,
// say): without a name it has no id.
func namedInArchive(ref, id string, tags []string) archiveImage {
	named := archiveImage{ref: ref}
	want := containerdRef(ref)
	if want == "" {
		return named
	}
	local := podmanLocalRef(ref)
	for _, tag := range tags {
		switch r := containerdRef(tag); {
		case r == want:
			named.id, named.archived = id, ""
		case r == local && named.id == "":
			named.id, named.archived = id, r
		}
	}
	return named
}

// podmanLocalRef is the containerd name of the image podman files under
// "localhost/" when an archive names it ref, a reference without a
// registry; "" for a reference with one.
func podmanLocalRef(ref string) string {
	if containerdRef(ref) == "" || docker.RegistryHost(ref) != "" {
		return ""
	}
	return containerdRef("localhost/" + ref)
}

// load streams an image archive to the nodes that miss one of imgs (to
// every node when imgs is empty: an archive whose images are not known),
// then labels the imported images with their IDs.
func (c *Cluster) load(ctx context.Context, nodes []*Node, what string, imgs []archiveImage, open func(missing []archiveImage) (io.ReadCloser, error)) error {
	start := time.Now()
	// Which node misses which image.
	missing := make([][]archiveImage, len(nodes))
	err := concurrent.Each(len(nodes), func(i int) error {
		m, err := missingImages(ctx, nodes[i], imgs)
		missing[i] = m
		return err
	})
	if err != nil {
		return fmt.Errorf("load image %s: %w", what, err)
	}
	var targets, skipped []*Node
	var need []archiveImage
	seen := map[string]bool{}
	for i, n := range nodes {
		if len(imgs) > 0 && len(missing[i]) == 0 {
			skipped = append(skipped, n)
			continue
		}
		targets = append(targets, n)
		for _, m := range missing[i] {
			if !seen[m.ref] {
				seen[m.ref] = true
				need = append(need, m)
			}
		}
	}
	if len(targets) == 0 {
		c.log.Printf("kindtest: %s: %s already on %s: nothing imported (%v)", c.name, what, names(skipped), time.Since(start).Round(time.Millisecond))
		return nil
	}
	node, err := c.docker.InspectImage(ctx, c.cfg.image)
	if err != nil {
		return fmt.Errorf("load image %s: node image: %w", what, err)
	}
	src, err := open(need)
	if err != nil {
		return fmt.Errorf("load image %s: %w", what, err)
	}
	defer src.Close()

	readers := make([]*io.PipeReader, len(targets))
	fan := &fanOut{}
	for i := range targets {
		r, w := io.Pipe()
		readers[i] = r
		fan.writers = append(fan.writers, w)
	}
	var copyErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, copyErr = io.Copy(fan, src)
		fan.close(copyErr)
	}()
	cmd := importCommand(node.Platform, need)
	err = concurrent.Each(len(targets), func(i int) error {
		n := targets[i]
		_, err := n.ExecInput(ctx, readers[i], cmd...)
		// Whatever happened, this node reads no more: let the others go on.
		readers[i].CloseWithError(errors.New("node stopped reading"))
		if err != nil {
			return fmt.Errorf("load image %s into %s: %w", what, n.name, err)
		}
		return nil
	})
	wg.Wait()
	if err == nil && copyErr != nil {
		err = fmt.Errorf("load image %s: read: %w", what, copyErr)
	}
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("kindtest: %s: loaded %s into %s in %v", c.name, what, names(targets), time.Since(start).Round(time.Millisecond))
	if len(skipped) > 0 {
		msg += fmt.Sprintf(" (%s had it already)", names(skipped))
	}
	c.log.Printf("%s", msg)
	return nil
}

func names(nodes []*Node) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.name
	}
	return strings.Join(s, ", ")
}

// importCommand imports the archive on stdin into the node's containerd
// (only the node's platform), then names each image whose ID is known as
// it was asked for, where the archive named it otherwise, and labels it.
func importCommand(platform string, imgs []archiveImage) []string {
	var labels []bootstrap.ImageLabel
	for _, m := range imgs {
		if ref := containerdRef(m.ref); ref != "" && m.id != "" {
			labels = append(labels, bootstrap.ImageLabel{From: m.archived, Ref: ref, Label: imageIDLabel + "=" + m.id})
		}
	}
	return bootstrap.ImportImagesCommand(platform, labels)
}

// missingImages returns the images of imgs the node does not have under
// their name with the same ID, as kindtest labelled them. It asks
// containerd for names only, which costs about what an exec of `true`
// does (a full listing sums up every image's size).
func missingImages(ctx context.Context, n *Node, imgs []archiveImage) ([]archiveImage, error) {
	cmd := []string{"ctr", "--namespace", "k8s.io", "images", "ls", "--quiet"}
	for _, m := range imgs {
		if ref := containerdRef(m.ref); ref != "" && m.id != "" {
			cmd = append(cmd, imageFilter(ref, m.id))
		}
	}
	have := map[string]bool{}
	if len(cmd) > 6 {
		out, err := n.run(ctx, cmd...)
		if err != nil {
			return nil, fmt.Errorf("list images on %s: %w", n.name, err)
		}
		for _, line := range strings.Split(out, "\n") {
			have[strings.TrimSpace(line)] = true
		}
	}
	var missing []archiveImage
	for _, m := range imgs {
		if ref := containerdRef(m.ref); ref == "" || m.id == "" || !have[ref] {
			missing = append(missing, m)
		}
	}
	return missing, nil
}

// imageFilter is a containerd filter for the image named ref whose
// kindtest ID label is id. Several filters given to `ctr images ls` are
// alternatives.
func imageFilter(ref, id string) string {
	quote := func(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }
	return "name==" + quote(ref) + ",labels." + quote(imageIDLabel) + "==" + quote(id)
}

// containerdRef is the name containerd files a Docker image reference
// under (docker.io/library/busybox:latest for busybox), or "" for a
// reference by ID or digest, which an import does not name.
func containerdRef(ref string) string {
	if ref == "" || strings.Contains(ref, "@") || strings.HasPrefix(ref, "sha256:") {
		return ""
	}
	if docker.RegistryHost(ref) == "" {
		if !strings.Contains(ref, "/") {
			ref = "library/" + ref
		}
		ref = "docker.io/" + ref
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.Contains(last, ":") {
		ref += ":latest"
	}
	return ref
}

// scanArchive reads an image archive's manifest.json for the images it
// holds and their IDs. An archive without one (a bare OCI layout) yields
// no images: it is loaded into every node.
func scanArchive(path string) ([]archiveImage, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file (write one with `docker save -o FILE IMAGE...`)", path)
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory: want an image archive file (`docker save -o FILE IMAGE...`)", path)
	}
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	tr := tar.NewReader(r)
	for first := true; ; first = false {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if first {
				return nil, fmt.Errorf("%s: empty archive: want an image archive (`docker save -o FILE IMAGE...`)", path)
			}
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not an image archive (a tar file, as `docker save -o FILE IMAGE...` writes): %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "manifest.json" {
			continue
		}
		var manifest []struct {
			Config   string
			RepoTags []string
		}
		if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&manifest); err != nil {
			return nil, fmt.Errorf("%s: manifest.json: %w", path, err)
		}
		var imgs []archiveImage
		for _, m := range manifest {
			id := strings.TrimSuffix(filepath.Base(m.Config), ".json")
			if len(id) == 64 {
				id = "sha256:" + id
			} else {
				id = ""
			}
			if len(m.RepoTags) == 0 {
				// Unnamed: nothing can tell whether a node has it.
				imgs = append(imgs, archiveImage{id: id})
			}
			for _, tag := range m.RepoTags {
				imgs = append(imgs, archiveImage{ref: tag, id: id})
			}
		}
		return imgs, nil
	}
}

// fanOut writes to every writer that still accepts; one that fails is
// dropped so that the others go on. It fails only when none is left.
type fanOut struct {
	writers []*io.PipeWriter
}

func (f *fanOut) Write(p []byte) (int, error) {
	alive := f.writers[:0]
	for _, w := range f.writers {
		if _, err := w.Write(p); err == nil {
			alive = append(alive, w)
		}
	}
	f.writers = alive
	if len(alive) == 0 {
		return 0, errors.New("no node is reading")
	}
	return len(p), nil
}

func (f *fanOut) close(err error) {
	for _, w := range f.writers {
		w.CloseWithError(err)
	}
}
