package images

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	// A build of the same inputs whose process was killed while its
	// builder ran left the container, under the name this build uses.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := b.buildLabels()
	leftover[lifetime.LabelOwnerPID] = strconv.Itoa(dead.Process.Pid)
	t.Cleanup(func() { cli.RemoveLabelled(context.Background(), map[string]string{lifetime.LabelBuild: id}) })
	if _, err := cli.CreateContainer(ctx, docker.ContainerSpec{Name: builderName(b.res.ContentHash, r), Image: DebianImage, Labels: leftover}); err != nil {
		t.Fatal(err)
	}
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
// of its own, or one of images) or an image under the root file system's
// reference ref.
func checkNothingLeft(ctx context.Context, t *testing.T, cli *docker.Client, b *builder, ref string, images ...string) {
	t.Helper()
	id := b.res.ContentHash[:hashLength]
	if own, err := cli.ListContainers(ctx, map[string]string{lifetime.LabelBuild: id}); err != nil || len(own) > 0 {
		t.Errorf("containers of the build left: %+v (%v)", own, err)
	}
	all, err := cli.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if slices.Contains(images, c.Image) || strings.HasPrefix(c.Name, "kindtest-build-"+id) {
			t.Errorf("container %s (%s, of %s) left", c.Name, c.ID, c.Image)
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
	checkNothingLeft(ctx, t, cli, b, ref, from, builderRef(from))
	if _, err := cli.InspectImage(ctx, builderRef(from)); !docker.IsNotFound(err) {
		t.Errorf("builder image %s: %v; want none", builderRef(from), err)
	}
}

// ensureBuilderImage makes sure the engine has the builder image FROM
// DebianImage, building it only where the engine has DebianImage; without
// either the test is skipped, or fails under CI.
func ensureBuilderImage(ctx context.Context, t *testing.T, cli *docker.Client) {
	t.Helper()
	if _, err := cli.InspectImage(ctx, builderRef(DebianImage)); err == nil {
		return
	}
	if _, err := cli.InspectImage(ctx, DebianImage); err != nil {
		msg := fmt.Sprintf("needs the builder image %s, or %s to build it from: %v", builderRef(DebianImage), DebianImage, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set CI=true to make this a failure)")
	}
	if _, err := ensureBuilder(ctx, cli, testLogger{t}, DebianImage); err != nil {
		t.Fatal(err)
	}
}

// TestInEngineFaultBuilderKilled kills the builder container while
// mmdebstrap runs in it, as docker kill, the OOM killer or an engine
// restart would. The build fails saying the container was killed, with
// its exit code, and that running the build again starts a new one; it
// leaves neither the container nor an image under the root file
// system's tag.
func TestInEngineFaultBuilderKilled(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ensureBuilderImage(ctx, t, cli)
	p, err := resolvePlatform(ctx, cli, "")
	if err != nil {
		t.Fatal(err)
	}
	b, r, ref := smallRootfsBuild(t, cli, p, DebianImage)
	own := map[string]string{lifetime.LabelBuild: b.res.ContentHash[:hashLength]}
	t.Cleanup(func() { cli.RemoveLabelled(context.Background(), own) })

	built := make(chan error, 1)
	go func() { built <- b.rootfsImage(ctx, r) }()
	// Killed once mmdebstrap has begun: it announces its first step,
	// apt-get update, before it needs the mirror.
	var killed docker.Container
	ended := false
	poll(ctx, t, "mmdebstrap running in the builder container", func() (string, bool) {
		select {
		case err := <-built:
			built <- err
			ended = true
			return "", true
		default:
		}
		cs, err := cli.ListContainers(ctx, own)
		if err != nil {
			return err.Error(), false
		}
		if len(cs) == 0 || !cs[0].Running {
			return fmt.Sprintf("%d containers of the build, none running", len(cs)), false
		}
		logs, err := cli.ContainerLogs(ctx, cs[0].ID, 5)
		if err != nil || !strings.Contains(logs, "apt-get update") {
			return fmt.Sprintf("logs %q, %v", logs, err), false
		}
		killed = cs[0]
		return "", true
	})
	if ended {
		t.Fatalf("the build ended before the test could kill its container: %v", <-built)
	}
	if err := cli.KillContainer(ctx, killed.ID, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	err = <-built
	if err == nil {
		t.Fatalf("built %s though its builder container %s was killed", ref, killed.Name)
	}
	t.Logf("the error:\n%v", err)
	for _, want := range []string{
		"builder container " + killed.Name,
		"killed by signal 9 (exit code 137",
		"running the build again starts a new one",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q", want)
		}
	}
	checkNothingLeft(ctx, t, cli, b, ref)
}

// TestBuilderExit tells a builder container killed by a signal from
// mmdebstrap failing, by the exit code alone.
func TestBuilderExit(t *testing.T) {
	for _, tc := range []struct {
		code int
		want string
	}{
		{137, "killed by signal 9 (exit code 137"},
		{143, "killed by signal 15 (exit code 143"},
		{1, "exited with code 1"},
		{255, "exited with code 255"}, // perl's die
	} {
		if err := builderExit("c", tc.code, "logs"); !strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), "\nlogs") {
			t.Errorf("builderExit(%d) = %q, want it to say %q and end with the logs", tc.code, err, tc.want)
		}
	}
}
