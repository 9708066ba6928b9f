package kindtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/concurrent"
)

// LoadImage copies images from the host's engine into the containerd of
// every node, streaming one `docker save` to all nodes at once with no
// temporary file, so that pods with imagePullPolicy Never or IfNotPresent
// run them.
//
// Only the nodes' platform is imported. Under the containerd image store
// (Docker Desktop, Docker 29's default) `docker save` writes an image's
// whole index while only the pulled platform's content exists, and an
// import that walks every platform fails on the first missing one
// (kind#3795).
func (c *Cluster) LoadImage(ctx context.Context, refs ...string) error {
	if len(refs) == 0 {
		return errors.New("load image: no image named")
	}
	start := time.Now()
	for _, ref := range refs {
		if _, err := c.docker.InspectImage(ctx, ref); err != nil {
			return fmt.Errorf("load image %s: not in the host engine (build or pull it first): %w", ref, err)
		}
	}
	node, err := c.docker.InspectImage(ctx, c.cfg.image)
	if err != nil {
		return fmt.Errorf("load image: node image: %w", err)
	}
	src, err := c.docker.SaveImages(ctx, refs)
	if err != nil {
		return fmt.Errorf("load image: %w", err)
	}
	defer src.Close()

	readers := make([]*io.PipeReader, len(c.nodes))
	fan := &fanOut{}
	for i := range c.nodes {
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
	err = concurrent.Each(len(c.nodes), func(i int) error {
		n := c.nodes[i]
		_, err := n.ExecInput(ctx, readers[i], "ctr", "--namespace", "k8s.io", "images", "import", "--digests", "--platform", node.Platform, "-")
		// Whatever happened, this node reads no more: let the others go on.
		readers[i].CloseWithError(errors.New("node stopped reading"))
		if err != nil {
			return fmt.Errorf("load image into %s: %w", n.name, err)
		}
		return nil
	})
	wg.Wait()
	if err == nil && copyErr != nil {
		err = fmt.Errorf("load image: read from engine: %w", copyErr)
	}
	if err != nil {
		return err
	}
	c.log.Printf("kindtest: %s: loaded %s into %d node(s) in %v", c.name, strings.Join(refs, ", "), len(c.nodes), time.Since(start).Round(time.Millisecond))
	return nil
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
