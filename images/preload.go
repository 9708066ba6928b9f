package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// preload loads the component images into the node's containerd at build
// time, so that no node imports them at boot.
//
// containerd's overlayfs snapshotter cannot keep its snapshots on the
// overlay file system of a container, so a loader container from the node
// image runs containerd alone with /var/lib/containerd on a volume and
// imports the `docker save` stream there, unpacking every layer and then
// dropping the packed copies (--discard-unpacked-layers), so that the image
// holds each layer once. The volume's content is then copied into a
// container created from the node image, with the unpacked layers moved out
// of /var (see relocateSnapshots), and that container is committed as the
// final image.
func (b *builder) preload(ctx context.Context) (err error) {
	short := b.res.ContentHash[:hashLength]
	name := "kindtest-build-" + short
	loaderName, commitName := name+"-load", name+"-commit"
	labels := b.buildLabels()

	// The loader and its volume carry LabelBuild, so that this also sweeps
	// what a killed build left (but not what a build running beside this
	// one uses: see sweepBuilds). The commit container does not: its
	// labels would end up in the image.
	cleanup := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return errors.Join(
			b.sweepBuilds(cctx),
			b.cli.RemoveContainer(cctx, commitName),
		)
	}
	if err := cleanup(); err != nil {
		return fmt.Errorf("remove leftovers of an earlier build: %w", err)
	}
	defer func() {
		if cerr := cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	if err := b.cli.CreateVolume(ctx, name, labels); err != nil {
		return err
	}
	loader, err := b.cli.CreateContainer(ctx, docker.ContainerSpec{
		Name:       loaderName,
		Image:      b.buildRef(),
		Labels:     labels,
		Entrypoint: []string{"/usr/local/bin/containerd", "--config", "/etc/containerd/config.toml"},
		Privileged: true,
		Tmpfs:      map[string]string{"/run": "", "/tmp": ""},
		Volumes:    map[string]string{name: "/var/lib/containerd"},
	})
	if err != nil {
		return err
	}
	if err := b.cli.StartContainer(ctx, loader); err != nil {
		return err
	}
	if err := b.waitContainerd(ctx, loader); err != nil {
		return err
	}

	start := time.Now()
	saved, err := b.savedComponents(ctx)
	if err != nil {
		return err
	}
	defer saved.Close()
	if _, err := b.exec(ctx, loader, saved, "ctr", "--namespace", "k8s.io", "images", "import",
		"--local", "--discard-unpacked-layers", "--platform", b.platform.String(), "-"); err != nil {
		return err
	}
	// The discarded layers go at containerd's next garbage collection, which
	// is scheduled lazily; deleting a throwaway tag with --sync runs one now.
	const gcTrigger = "kindtest.invalid/gc-trigger:latest"
	if _, err := b.exec(ctx, loader, nil, "ctr", "--namespace", "k8s.io", "images", "tag", "--force", b.components[0], gcTrigger); err != nil {
		return err
	}
	if _, err := b.exec(ctx, loader, nil, "ctr", "--namespace", "k8s.io", "images", "rm", "--sync", gcTrigger); err != nil {
		return err
	}
	listed, err := b.exec(ctx, loader, nil, "ctr", "--namespace", "k8s.io", "images", "list", "--quiet")
	if err != nil {
		return err
	}
	have := strings.Fields(listed)
	for _, ref := range b.components {
		if !slices.Contains(have, ref) {
			return fmt.Errorf("image %s missing from containerd after import (have %v)", ref, have)
		}
	}
	b.cfg.logger.Printf("  imported %d images into containerd in %s", len(b.components), time.Since(start).Round(100*time.Millisecond))

	// A clean stop lets containerd close its metadata database.
	if err := b.cli.KillContainer(ctx, loader, "SIGTERM"); err != nil {
		return err
	}
	if err := b.waitStopped(ctx, loader); err != nil {
		return err
	}

	start = time.Now()
	final, err := b.cli.CreateContainer(ctx, docker.ContainerSpec{Name: commitName, Image: b.buildRef()})
	if err != nil {
		return err
	}
	data, err := b.cli.CopyFromContainer(ctx, loader, "/var/lib/containerd")
	if err != nil {
		return err
	}
	defer data.Close()
	relocated, w := io.Pipe()
	defer relocated.Close()
	go func() { w.CloseWithError(relocateSnapshots(data, w)) }()
	if err := b.cli.CopyToContainer(ctx, final, "/", relocated); err != nil {
		return err
	}
	if _, err := b.cli.CommitContainer(ctx, final, b.res.ContentImage, nil); err != nil {
		return err
	}
	b.cfg.logger.Printf("  committed %s in %s", b.res.ContentImage, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// savedComponents streams the component images as a `docker save`
// archive, under the names kubeadm gives them: those of another platform
// than the engine's are kept under a suffixed tag (see Result.Local).
func (b *builder) savedComponents(ctx context.Context) (io.ReadCloser, error) {
	local := make([]string, len(b.components))
	renames := map[string]string{}
	for i, ref := range b.components {
		local[i] = b.res.Local(ref)
		renames[local[i]] = ref
	}
	saved, err := b.cli.SaveImages(ctx, local)
	if err != nil || !b.platform.foreign {
		return saved, err
	}
	r, w := io.Pipe()
	go func() {
		err := docker.RetagArchive(saved, w, renames)
		saved.Close()
		w.CloseWithError(err)
	}()
	return r, nil
}

// exec runs a command in a container and returns its stdout; a non-zero
// exit is an error with the command's output.
func (b *builder) exec(ctx context.Context, id string, stdin io.Reader, cmd ...string) (string, error) {
	var stdout bytes.Buffer
	var stderr tailBuffer
	opts := docker.ExecOptions{Stdout: &stdout, Stderr: &stderr}
	if stdin != nil {
		opts.Stdin = stdin
	}
	code, err := b.cli.Exec(ctx, id, cmd, opts)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("%s: exit code %d: %s", strings.Join(cmd, " "), code, stderr.String())
	}
	return stdout.String(), nil
}

// waitContainerd polls until containerd in the loader answers.
func (b *builder) waitContainerd(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := b.exec(ctx, id, nil, "ctr", "version")
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			logs, _ := b.cli.ContainerLogs(context.WithoutCancel(ctx), id, 20)
			return fmt.Errorf("containerd in the loader container did not answer: %w\n%s", err, logs)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitStopped polls until the container has exited.
func (b *builder) waitStopped(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := b.cli.InspectContainer(ctx, id)
		if err != nil {
			return err
		}
		if !c.Running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loader container did not stop: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
