package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
)

// imageCmd runs `kindtest image save|load`.
func imageCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"image: say save or load"}
	}
	switch args[0] {
	case "save":
		return imageSave(ctx, args[1:], out)
	case "load":
		return imageLoad(ctx, args[1:], out)
	}
	return usageError{fmt.Sprintf("image: unknown command %q (save or load)", args[0])}
}

// imageSave writes the node image (under all its kindtest/node tags, so
// that `kindtest build` finds it up to date after a load) and the reaper,
// registry and load-balancer images, or the images named, to one `docker
// save` archive. With -platform naming another platform than the engine's,
// it writes the images `kindtest build -platform` made for it under the
// names an engine of that platform expects: without the platform's suffix.
func imageSave(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("image save", flag.ContinueOnError)
	file := fs.String("o", "", "the archive file to write")
	platform := fs.String("platform", "", "save the images built for this platform ("+strings.Join(images.Platforms, ", ")+"); default: the engine's")
	refs, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *file == "" {
		return usageError{"image save: name the file with -o FILE"}
	}
	if *platform != "" {
		if *platform, err = images.ParsePlatform(*platform); err != nil {
			return usageError{fmt.Sprintf("image save: -platform: %v", err)}
		}
	}
	start := time.Now()
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	// foreign is the platform asked for where the engine's is another:
	// its images carry its suffix here, and lose it in the archive.
	foreign, suffix := "", ""
	if *platform != "" {
		info, err := dc.Info(ctx)
		if err != nil {
			return fmt.Errorf("image save: %w", err)
		}
		if engine, _ := info.Platform(); engine != *platform {
			foreign, suffix = *platform, images.PlatformSuffix(*platform)
		}
	}
	if len(refs) == 0 {
		nodeRef := images.DefaultNodeImage + suffix
		node, err := dc.InspectImage(ctx, nodeRef)
		if err != nil {
			build := "kindtest build"
			if foreign != "" {
				build += " -platform " + foreign
			}
			return fmt.Errorf("image save: %w (build it first with `%s`)", err, build)
		}
		for _, tag := range node.Tags {
			if strings.HasPrefix(tag, "kindtest/node:") && (foreign == "" || images.WithoutPlatformSuffix(tag, foreign) != tag) {
				refs = append(refs, tag)
			}
		}
		for _, ref := range []string{images.ReaperImage, images.RegistryImage, images.LoadBalancerImage} {
			if _, err := dc.InspectImage(ctx, ref+suffix); err == nil {
				refs = append(refs, ref+suffix)
			}
		}
	}
	slices.Sort(refs)
	renames := map[string]string{}
	for _, ref := range refs {
		if foreign == "" {
			continue
		}
		if plain := images.WithoutPlatformSuffix(ref, foreign); plain != ref {
			renames[ref] = plain
		}
	}
	tmp := *file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("image save: %w", err)
	}
	defer os.Remove(tmp) // after a successful rename, there is nothing to remove
	rc, err := dc.SaveImages(ctx, refs)
	if err != nil {
		f.Close()
		return fmt.Errorf("image save: %w", err)
	}
	counted := &countingWriter{w: f}
	if len(renames) > 0 {
		err = docker.RetagArchive(rc, counted, renames)
	} else {
		_, err = io.Copy(counted, rc)
	}
	n := counted.n
	rc.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, *file)
	}
	if err != nil {
		return fmt.Errorf("image save %v to %s: %w", refs, *file, err)
	}
	saved := slices.Clone(refs)
	for i, ref := range saved {
		if plain, ok := renames[ref]; ok {
			saved[i] = ref + " as " + plain
		}
	}
	fmt.Fprintf(out, "saved %s to %s (%d MB) in %s\n", strings.Join(saved, ", "), *file, n>>20, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// imageLoad loads an archive made by `kindtest image save` (or `docker
// save`) after checking that it is complete.
func imageLoad(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("image load", flag.ContinueOnError)
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usageError{"image load: name one archive file"}
	}
	file := files[0]
	start := time.Now()
	advice := fmt.Sprintf("make it again with `kindtest image save -o %s`, or build the image with `kindtest build`", file)
	tags, err := checkArchive(file)
	if err != nil {
		return fmt.Errorf("image load %s: %w; nothing was loaded: %s", file, err, advice)
	}
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("image load: %w", err)
	}
	defer f.Close()
	loaded, err := dc.LoadImages(ctx, f)
	if err != nil {
		return fmt.Errorf("image load %s: %w (images loaded completely before the failure: %v; the engine tags no partial image): %s", file, err, loaded, advice)
	}
	fmt.Fprintf(out, "loaded %s from %s in %s\n", strings.Join(loaded, ", "), file, time.Since(start).Round(100*time.Millisecond))
	if len(loaded) == 0 {
		return fmt.Errorf("image load %s: the engine loaded no image (the archive names %v)", file, tags)
	}
	return nil
}

// checkArchive reads a `docker save` archive to its end and checks that
// every file its manifest.json names is in it, whole. It returns the tags
// the manifest names. A truncated or corrupt file fails here, before the
// engine sees it.
func checkArchive(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	have := map[string]bool{}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	foundManifest := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a complete tar archive (truncated or corrupt?): %w", err)
		}
		name := path.Clean(hdr.Name)
		if name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				return nil, fmt.Errorf("bad manifest.json: %w", err)
			}
			foundManifest = true
		}
		// Reading the entry to its end finds a truncated one.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nil, fmt.Errorf("entry %s is cut short (truncated file?): %w", hdr.Name, err)
		}
		have[name] = true
	}
	if !foundManifest || len(manifest) == 0 {
		return nil, errors.New("no manifest.json naming images: not an image archive, or truncated")
	}
	var tags []string
	for _, m := range manifest {
		for _, p := range append([]string{m.Config}, m.Layers...) {
			if !have[path.Clean(p)] {
				return nil, fmt.Errorf("%s lacks %s, which its manifest names (truncated?)", strings.Join(m.RepoTags, ", "), p)
			}
		}
		tags = append(tags, m.RepoTags...)
	}
	return tags, nil
}

// pushImages pushes the node image of res as ref, and the reaper,
// registry and load-balancer images of its platform beside it
// (images.ReaperRef, ...), to a registry.
func pushImages(ctx context.Context, res images.Result, ref string, out io.Writer) error {
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	if err := pushPairs(ctx, dc, pushList(res, ref, ""), out); err != nil {
		return err
	}
	fmt.Fprintf(out, "use it with KINDTEST_IMAGE=%s (the reaper and registry images are pulled from beside it)\n", ref)
	return nil
}

// pushList pairs the local images of res's platform with the references
// they are pushed as: ref and beside it, each with suffix after its tag.
func pushList(res images.Result, ref, suffix string) [][2]string {
	return [][2]string{
		{res.ContentImage, ref + suffix},
		{res.Local(images.ReaperImage), images.ReaperRef(ref) + suffix},
		{res.Local(images.RegistryImage), images.RegistryRef(ref) + suffix},
		{res.Local(images.LoadBalancerImage), images.LoadBalancerRef(ref) + suffix},
	}
}

// pushPairs tags and pushes each local image as its remote reference.
func pushPairs(ctx context.Context, dc *docker.Client, pairs [][2]string, out io.Writer) error {
	for _, p := range pairs {
		local, remote := p[0], p[1]
		host := docker.RegistryHost(remote)
		start := time.Now()
		if err := dc.TagImage(ctx, local, remote); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		fmt.Fprintf(out, "pushing %s as %s\n", local, remote)
		err := dc.PushImage(ctx, remote, docker.ProgressEvery(3*time.Second, func(t docker.Transfer) {
			fmt.Fprintf(out, "pushing %s: %s (%s)\n", remote, t, time.Since(start).Round(time.Second))
		}))
		if err != nil {
			return fmt.Errorf("push %s: %w. Check that the registry %s answers and that you may push there (`docker login %s`)", remote, err, host, host)
		}
		fmt.Fprintf(out, "pushed %s in %s\n", remote, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// pushMultiPlatform pushes the images of every platform built under
// per-platform tags (ref-amd64, ref-arm64, and so beside it), then an OCI
// image index under each plain reference that names them all: a pull of
// ref picks the engine's platform.
func pushMultiPlatform(ctx context.Context, results []images.Result, ref string, out io.Writer) error {
	dc, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	indexes := map[string]map[string]string{} // plain remote -> platform -> per-platform remote
	var order []string
	for _, res := range results {
		pairs := pushList(res, ref, images.PlatformSuffix(res.Platform))
		if err := pushPairs(ctx, dc, pairs, out); err != nil {
			return err
		}
		for i, plain := range pushList(res, ref, "") {
			remote := plain[1]
			if indexes[remote] == nil {
				indexes[remote] = map[string]string{}
				order = append(order, remote)
			}
			indexes[remote][res.Platform] = pairs[i][1]
		}
	}
	for _, remote := range order {
		start := time.Now()
		if err := dc.PushIndex(ctx, remote, indexes[remote]); err != nil {
			host := docker.RegistryHost(remote)
			return fmt.Errorf("push the image index %s: %w. Check that the registry %s answers and that you may push there (`docker login %s`)", remote, err, host, host)
		}
		fmt.Fprintf(out, "pushed the image index %s for %s in %s\n", remote, strings.Join(slices.Sorted(maps.Keys(indexes[remote])), ", "), time.Since(start).Round(100*time.Millisecond))
	}
	fmt.Fprintf(out, "use it with KINDTEST_IMAGE=%s on an engine of any of these platforms (the reaper and registry images are pulled from beside it)\n", ref)
	return nil
}
