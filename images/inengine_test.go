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
		cfg:      &buildConfig{logger: testLogger{t}, sourceDir: dir, cacheDir: t.TempDir(), inEngine: true, builderFrom: DebianImage},
		cli:      cli,
		platform: p,
		res:      Result{ContentHash: hash},
	}
	if err := b.rootfsImage(ctx, r); err != nil {
		t.Fatal(err)
	}
	img, err := cli.InspectImage(ctx, ref)
	if err != nil || img.Platform != native {
		t.Fatalf("%s: %+v, %v; want an image for %s", ref, img, err, native)
	}
	code, out, err := cli.RunOnce(ctx, docker.ContainerSpec{
		Name:       "kindtest-test-rootfs-" + hex.EncodeToString(id[:]),
		Image:      ref,
		Entrypoint: []string{"sh", "-c", "cat /etc/debian_version && test -s /etc/ssl/certs/ca-certificates.crt && echo certificates"},
	})
	if err != nil || code != 0 || !strings.HasPrefix(out, "12.") || !strings.Contains(out, "certificates") {
		t.Errorf("in %s: exit %d, %v: %q; want Debian 12 with ca-certificates installed", ref, code, err, out)
	}
	left, err := cli.ListContainers(ctx, map[string]string{lifetime.LabelBuild: hash[:hashLength]})
	if err != nil || len(left) > 0 {
		t.Errorf("builder containers left: %v (%v)", left, err)
	}
}
