package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// WithInEngine makes the root file systems in a builder container on the
// engine instead of on this machine: mmdebstrap runs there. Go programs
// are still compiled here, with this machine's Go build cache. Default:
// in the engine only where this machine cannot make them, on a host that
// is not Linux or that lacks mmdebstrap.
//
// The builder is FROM DebianImage, which the engine pulls if it does not
// have it, with mmdebstrap installed from Debian's mirror. The images are
// the same, under the same tags and content hash, as those of a build on
// the host.
func WithInEngine() BuildOption {
	return func(c *buildConfig) error {
		c.inEngine = true
		return nil
	}
}

// DebianImage is the image the builder container starts from.
const DebianImage = "debian:" + debianSuite

// builderDockerfile makes the builder image FROM from: mmdebstrap and
// what it needs to make root file systems of another architecture under
// an engine host's binfmt_misc emulation (arch-test to tell).
func builderDockerfile(from string) string {
	return `FROM ` + from + `
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap arch-test ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/*
`
}

// builderRef is the reference of the builder image FROM from, tagged by
// its recipe.
func builderRef(from string) string {
	return "kindtest/builder:" + debianSuite + "-" + hashStrings(builderDockerfile(from))[:hashLength]
}

// rootfsInEngine reports whether the root file systems are made on the engine:
// asked for, or this machine cannot.
func (c *buildConfig) rootfsInEngine() bool {
	if c.inEngine || runtime.GOOS != "linux" {
		return true
	}
	_, err := exec.LookPath("mmdebstrap")
	return err != nil
}

// ensureBuilder builds the builder image FROM from unless it exists, and
// returns its reference.
func ensureBuilder(ctx context.Context, cli *docker.Client, logger Logger, from string) (string, error) {
	ref := builderRef(from)
	if _, err := cli.InspectImage(ctx, ref); err == nil {
		return ref, nil
	} else if !docker.IsNotFound(err) {
		return "", err
	}
	// Pulled apart from the build, so that a base the engine cannot get
	// is told from a Debian mirror the build cannot reach.
	if _, err := cli.InspectImage(ctx, from); docker.IsNotFound(err) {
		logger.Printf("  pulling %s, which the builder image starts FROM", from)
		if err := cli.PullImage(ctx, from, nil); err != nil {
			return "", fmt.Errorf("the builder image %s starts FROM %s, which the engine does not have and cannot pull: %w\n%s", ref, from, err, baseNeeds(from))
		}
	} else if err != nil {
		return "", err
	}
	logger.Printf("  building the builder image %s FROM %s (apt-get install mmdebstrap)", ref, from)
	tarStream := contextTar([]tarFile{{name: "Dockerfile", data: []byte(builderDockerfile(from)), mode: 0o644}})
	defer tarStream.Close()
	var out tailBuffer
	if err := cli.BuildImage(ctx, tarStream, docker.BuildSpec{Tags: []string{ref}, Dockerfile: "Dockerfile"}, &out); err != nil {
		return "", fmt.Errorf("build the builder image %s FROM %s (its apt-get install of mmdebstrap needs Debian's mirror, from the engine's network): %w\n%s", ref, from, err, out.String())
	}
	return ref, nil
}

// baseNeeds says how to give the engine the image from, which the
// builder image starts FROM.
func baseNeeds(from string) string {
	return `The engine must be able to pull it (its registry reachable, or a registry
mirror set in its daemon.json), or be given it, by one of:
  - docker pull ` + from + ` (after docker login, if its registry asks for one);
  - docker load -i FILE, of the image saved with docker save where it is;
  - docker tag IMAGE ` + from + `, for a Debian ` + debianSuite + ` image the engine has.
Or, on Linux, install mmdebstrap (apt-get install mmdebstrap) and build
without -in-engine (images.WithInEngine): no builder image is needed then.`
}

// rootfsOnEngine runs mmdebstrap with args in a builder container on the
// engine (see rootfsInContainer) for the root file system r, to be
// imported as ref.
func (b *builder) rootfsOnEngine(ctx context.Context, r rootfs, ref string, args []string) (io.ReadCloser, error) {
	where := "in a builder container on the engine"
	if b.platform.foreign {
		where += ", for " + b.platform.String() + " under the engine's emulation (minutes)"
	}
	b.cfg.logger.Printf("  building %s with mmdebstrap %s", ref, where)
	builderImage, err := ensureBuilder(ctx, b.cli, b.cfg.logger, b.cfg.builderFrom)
	if err != nil {
		return nil, err
	}
	// A build process killed while its builder ran left the container,
	// under the name this one uses.
	if err := b.sweepBuilds(ctx); err != nil {
		return nil, fmt.Errorf("remove leftovers of an earlier build: %w", err)
	}
	name := builderName(b.res.ContentHash, r)
	return rootfsInContainer(ctx, b.cli, builderImage, name, b.buildLabels(), append(args, debianSuite, "/out/rootfs.tar"))
}

// builderName is the name of the builder container of the build whose
// content hash is hash, for r.
func builderName(hash string, r rootfs) string {
	return "kindtest-build-" + hash[:hashLength] + "-" + path.Base(r.repo)
}

// rootfsInContainer runs mmdebstrap with args (the last one the output
// file, below /out) in a container of the builder image on the engine
// and returns the root file system's tar stream, which the caller closes;
// the container is removed then.
func rootfsInContainer(ctx context.Context, cli *docker.Client, builderImage, name string, labels map[string]string, args []string) (io.ReadCloser, error) {
	// Privileged: mmdebstrap's root mode mounts /proc, /sys and /dev in
	// the chroot, and a root file system of another architecture needs
	// the engine host's binfmt_misc, mounted here.
	script := `mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
mkdir -p /out && exec mmdebstrap "$@"`
	id, err := cli.CreateContainer(ctx, docker.ContainerSpec{
		Name:       name,
		Image:      builderImage,
		Labels:     labels,
		Entrypoint: append([]string{"sh", "-c", script, "mmdebstrap"}, args...),
		Privileged: true,
	})
	if err != nil {
		return nil, err
	}
	remove := func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeoutRemove)
		defer cancel()
		return cli.RemoveContainer(rctx, id)
	}
	code, err := cli.StartAndWait(ctx, id)
	if err == nil && code != 0 {
		logs, _ := cli.ContainerLogs(context.WithoutCancel(ctx), id, 40)
		err = builderExit(name, code, logs)
	}
	if err != nil {
		return nil, errors.Join(err, remove())
	}
	out := args[len(args)-1]
	copied, err := cli.CopyFromContainer(ctx, id, out)
	if err != nil {
		return nil, errors.Join(err, remove())
	}
	// The copy is a tar stream holding the one file.
	tr := tar.NewReader(copied)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the copy of %s from the builder container holds no file", out)
		}
		if err != nil {
			copied.Close()
			return nil, errors.Join(err, remove())
		}
		if hdr.Typeflag == tar.TypeReg && strings.HasSuffix(out, "/"+hdr.Name) {
			return &closeFunc{Reader: tr, close: func() error { return errors.Join(copied.Close(), remove()) }}, nil
		}
	}
}

// builderExit is the error of the builder container name that ended
// with code before mmdebstrap finished, with logs, its last lines.
func builderExit(name string, code int, logs string) error {
	// 128+n is how a process killed by signal n ends (mmdebstrap's own
	// failures end with small codes, or 255).
	if signal := code - 128; signal > 0 && signal <= 64 {
		return fmt.Errorf("the builder container %s was killed by signal %d (exit code %d: docker kill, the kernel's OOM killer, or the engine stopping) before mmdebstrap finished; it is removed and nothing was imported, and running the build again starts a new one:\n%s", name, signal, code, logs)
	}
	return fmt.Errorf("mmdebstrap in the builder container %s exited with code %d:\n%s", name, code, logs)
}

// timeoutRemove bounds the removal of a builder container.
const timeoutRemove = 30 * time.Second
