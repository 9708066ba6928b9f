package images

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// ensureDebianImage makes sure the engine has DebianImage, which the
// builder starts FROM: pulled where a registry answers; where none does
// (the build machine of this project), a Debian root file system made
// with mmdebstrap on this machine stands in for it, under that name.
func ensureDebianImage(ctx context.Context, t *testing.T, cli *docker.Client) {
	t.Helper()
	if _, err := cli.InspectImage(ctx, DebianImage); err == nil {
		return
	}
	pullErr := cli.PullImage(ctx, DebianImage, nil)
	if pullErr == nil {
		return
	}
	t.Logf("pull %s: %v; making it with mmdebstrap instead", DebianImage, pullErr)
	out := filepath.Join(t.TempDir(), "debian.tar")
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=minbase", debianSuite, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmdebstrap of %s: %v\n%s", DebianImage, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := cli.ImportImage(ctx, f, DebianImage, []string{`CMD ["bash"]`}); err != nil {
		t.Fatal(err)
	}
}

// TestRootfsInEngine makes a small Debian root file system the way a host
// without mmdebstrap (a Mac, Windows) does: in a builder container on the
// engine, FROM debian:bookworm, with the packages from Debian's mirror.
// The image gets the tag a host build would give the same recipe.
func TestRootfsInEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a root file system in the engine: not in -short mode")
	}
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ensureDebianImage(ctx, t, cli)

	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	native, _ := info.Platform()
	p, err := resolvePlatform(ctx, cli, native)
	if err != nil {
		t.Fatal(err)
	}
	b, r, ref := smallRootfsBuild(t, cli, p, DebianImage)
	id := b.res.ContentHash[:hashLength]
	if err := b.rootfsImage(ctx, r); err != nil {
		t.Fatal(err)
	}
	img, err := cli.InspectImage(ctx, ref)
	if err != nil || img.Platform != native {
		t.Fatalf("%s: %+v, %v; want an image for %s", ref, img, err, native)
	}
	code, out, err := cli.RunOnce(ctx, docker.ContainerSpec{
		Name:       "kindtest-test-rootfs-" + id,
		Image:      ref,
		Entrypoint: []string{"sh", "-c", "cat /etc/debian_version && test -s /etc/ssl/certs/ca-certificates.crt && echo certificates"},
	})
	if err != nil || code != 0 || !strings.HasPrefix(out, "12.") || !strings.Contains(out, "certificates") {
		t.Errorf("in %s: exit %d, %v: %q; want Debian 12 with ca-certificates installed", ref, code, err, out)
	}
	left, err := cli.ListContainers(ctx, map[string]string{lifetime.LabelBuild: id})
	if err != nil || len(left) > 0 {
		t.Errorf("builder containers left: %v (%v)", left, err)
	}
}

// smallRootfsBuild is a build in the engine, for p, of a root file
// system of one package (ca-certificates) under a repository of its own,
// with a builder container FROM from. It returns the builder, the root
// file system and its image reference, which is removed when the test
// ends. The build's id (the content hash's start) is random too.
func smallRootfsBuild(t *testing.T, cli *docker.Client, p platform, from string) (*builder, rootfs, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "packages.txt"), []byte("ca-certificates\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var id [6]byte
	rand.Read(id[:])
	r := rootfs{repo: "kindtest-test/rootfs-" + hex.EncodeToString(id[:]), packages: "packages.txt"}
	ref, _, err := r.ref(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.RemoveImage(context.Background(), ref) })
	hash := hex.EncodeToString(id[:]) + hex.EncodeToString(id[:]) + strings.Repeat("0", 40)
	b := &builder{
		cfg:      &buildConfig{logger: testLogger{t}, sourceDir: dir, cacheDir: t.TempDir(), inEngine: true, builderFrom: from},
		cli:      cli,
		platform: p,
		res:      Result{ContentHash: hash},
	}
	return b, r, ref
}

// checkNothingLeft fails the test if the build b left a container (one
// of its own, or one of the image from or of the builder image FROM it)
// or an image under the root file system's reference ref.
func checkNothingLeft(ctx context.Context, t *testing.T, cli *docker.Client, b *builder, ref, from string) {
	t.Helper()
	if own, err := cli.ListContainers(ctx, map[string]string{lifetime.LabelBuild: b.res.ContentHash[:hashLength]}); err != nil || len(own) > 0 {
		t.Errorf("containers of the build left: %+v (%v)", own, err)
	}
	all, err := cli.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Image == from || c.Image == builderRef(from) || strings.HasPrefix(c.Name, "kindtest-build-"+b.res.ContentHash[:hashLength]) {
			t.Errorf("container %s (%s, from %s) left", c.Name, c.ID, c.Image)
		}
	}
	if _, err := cli.InspectImage(ctx, ref); !docker.IsNotFound(err) {
		t.Errorf("image %s: %v; want none: nothing half-built under the root file system's tag", ref, err)
	}
}

// TestInEngineFaultBaseUnpullable makes a root file system in the engine
// with a builder image FROM an image the engine does not have and cannot
// pull, as a machine without registry access has no debian:bookworm. The
// build fails saying which image, that the engine must pull it, and how
// else to give it; it leaves no builder image, no image under the root
// file system's tag and no container.
func TestInEngineFaultBaseUnpullable(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// .invalid never resolves (RFC 2606): no engine can pull it.
	const from = "kindtest.invalid/debian:none"
	for _, image := range []string{from, builderRef(from)} {
		if _, err := cli.InspectImage(ctx, image); !docker.IsNotFound(err) {
			t.Fatalf("image %s: %v; the test needs an engine without it (docker rmi %s)", image, err, image)
		}
	}
	p, err := resolvePlatform(ctx, cli, "")
	if err != nil {
		t.Fatal(err)
	}
	b, r, ref := smallRootfsBuild(t, cli, p, from)
	t.Cleanup(func() { cli.RemoveImage(context.Background(), builderRef(from)) })

	err = b.rootfsImage(ctx, r)
	if err == nil {
		t.Fatalf("built %s FROM %s, which cannot exist", ref, from)
	}
	t.Logf("the error:\n%v", err)
	for _, want := range []string{
		from,
		"does not have and cannot pull",
		"docker pull " + from,
		"docker load",
		"docker tag IMAGE " + from,
		"install mmdebstrap",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q", want)
		}
	}
	checkNothingLeft(ctx, t, cli, b, ref, from)
	if _, err := cli.InspectImage(ctx, builderRef(from)); !docker.IsNotFound(err) {
		t.Errorf("builder image %s: %v; want none", builderRef(from), err)
	}
}
