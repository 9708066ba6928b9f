package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/kindtest"
)

var (
	registryBinOnce sync.Once
	registryBin     string
	registryBinErr  error
)

// startRegistry builds the CNCF distribution registry (tools/registry) and
// runs it on a free port of 127.0.0.1, which Docker allows without TLS. With
// a user:password it requires basic authentication. It is stopped, and its
// storage removed, when the test ends. It returns host:port.
func startRegistry(t *testing.T, htpasswd string) string {
	t.Helper()
	registryBinOnce.Do(func() {
		// A cache, not a temporary file: the next run relinks it in place.
		cache, err := os.UserCacheDir()
		if err != nil {
			registryBinErr = err
			return
		}
		registryBin = filepath.Join(cache, "kindtest", "tools", "registry")
		cmd := exec.Command("go", "build", "-o", registryBin, "./registry")
		cmd.Dir = filepath.Join(repoRoot(t), "tools")
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			registryBinErr = fmt.Errorf("build the registry: %v\n%s", err, out)
		}
	})
	if registryBinErr != nil {
		t.Fatal(registryBinErr)
	}
	addr := freeAddr(t)
	args := []string{"-addr", addr, "-dir", t.TempDir()}
	if htpasswd != "" {
		args = append(args, "-htpasswd", htpasswd)
	}
	cmd := exec.Command(registryBin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s did not answer: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freeAddr returns a 127.0.0.1 address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// smallImage builds a small image of its own under ref (FROM scratch, a
// few MB of random data, so that no engine has its layer), removed when the
// test ends, and returns its ID.
func smallImage(ctx context.Context, t *testing.T, dc *docker.Client, ref string) string {
	t.Helper()
	data := make([]byte, 4<<20)
	rand.Read(data)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY data /data\n"),
		"data":       data,
	} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
		tw.Write(content)
	}
	tw.Close()
	if err := dc.BuildImage(ctx, &buf, docker.BuildSpec{Tags: []string{ref}, Dockerfile: "Dockerfile"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.RemoveImage(context.Background(), ref) })
	img, err := dc.InspectImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	return img.ID
}

func randomName(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// mustBeAbsent fails the test if the engine has ref.
func mustBeAbsent(ctx context.Context, t *testing.T, dc *docker.Client, ref string) {
	t.Helper()
	if _, err := dc.InspectImage(ctx, ref); !docker.IsNotFound(err) {
		t.Errorf("after the failure the engine has %s (%v): want it absent", ref, err)
	}
}

// TestRegistryPushPull pushes an image to a real registry, removes it from
// the engine, pulls it back and checks its ID; then does the same with the
// node image through `kindtest build --push` and a cluster that names the
// pushed reference, as a user's CI would.
func TestRegistryPushPull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a registry: not in -short mode")
	}
	dc := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	addr := startRegistry(t, "")

	t.Run("small image", func(t *testing.T) {
		ref := addr + "/kindtest-test/small:" + randomName(t)
		id := smallImage(ctx, t, dc, ref)
		var progress []docker.Transfer
		if err := dc.PushImage(ctx, ref, func(tr docker.Transfer) { progress = append(progress, tr) }); err != nil {
			t.Fatal(err)
		}
		if len(progress) == 0 || progress[len(progress)-1].Done != progress[len(progress)-1].Layers {
			t.Errorf("push progress %v: want it to end with every layer done", progress)
		}
		if err := dc.RemoveImage(ctx, ref); err != nil {
			t.Fatal(err)
		}
		mustBeAbsent(ctx, t, dc, ref)
		if err := dc.PullImage(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
		img, err := dc.InspectImage(ctx, ref)
		if err != nil || img.ID != id {
			t.Fatalf("pulled %s: ID %s (%v), pushed %s", ref, img.ID, err, id)
		}
	})

	// What `kindtest build -platform linux/amd64,linux/arm64 --push` writes:
	// an image per platform under its own tag, then an OCI index under
	// the plain one, from which a pull picks the engine's platform.
	t.Run("image index", func(t *testing.T) {
		info, err := dc.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		native, _ := info.Platform()
		repo, tag := "kindtest-test/multi", randomName(t)
		ref := addr + "/" + repo + ":" + tag
		perPlatform, ids := map[string]string{}, map[string]string{}
		for _, platform := range images.Platforms {
			remote := ref + images.PlatformSuffix(platform)
			data := make([]byte, 1<<20)
			rand.Read(data)
			var rootfs bytes.Buffer
			tw := tar.NewWriter(&rootfs)
			tw.WriteHeader(&tar.Header{Name: "data", Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
			tw.Write(data)
			tw.Close()
			if err := dc.ImportImageFor(ctx, &rootfs, remote, platform, nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dc.RemoveImage(context.Background(), remote) })
			if err := dc.PushImage(ctx, remote, nil); err != nil {
				t.Fatal(err)
			}
			img, err := dc.InspectImage(ctx, remote)
			if err != nil {
				t.Fatal(err)
			}
			perPlatform[platform], ids[platform] = remote, img.ID
		}
		if err := dc.PushIndex(ctx, ref, perPlatform); err != nil {
			t.Fatal(err)
		}

		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/"+repo+"/manifests/"+tag, nil)
		req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var index struct {
			MediaType string
			Manifests []struct {
				Digest   string
				Platform struct{ OS, Architecture string }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&index)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET the index: %s, %v", resp.Status, err)
		}
		var platforms []string
		for _, m := range index.Manifests {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
		if index.MediaType != "application/vnd.oci.image.index.v1+json" || strings.Join(platforms, " ") != strings.Join(images.Platforms, " ") {
			t.Errorf("index %s names %v, want an OCI index of %v", index.MediaType, platforms, images.Platforms)
		}

		t.Cleanup(func() { dc.RemoveImage(context.Background(), ref) })
		if err := dc.PullImage(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
		img, err := dc.InspectImage(ctx, ref)
		if err != nil || img.Platform != native || img.ID != ids[native] {
			t.Errorf("pulled %s: %s %s (%v), want the %s image %s", ref, img.Platform, img.ID, err, native, ids[native])
		}

		err = dc.PushIndex(ctx, ref, map[string]string{native: addr + "/kindtest-test/other:" + tag})
		if err == nil || !strings.Contains(err.Error(), "not in the repository") {
			t.Errorf("an index naming another repository's image: %v", err)
		}
	})

	t.Run("node image", func(t *testing.T) {
		ref := addr + "/kindtest/node:test-" + randomName(t)
		reaperRef := images.ReaperRef(ref)
		registryRef := images.RegistryRef(ref)
		lbRef := images.LoadBalancerRef(ref)
		t.Cleanup(func() {
			dc.RemoveImage(context.Background(), ref)
			dc.RemoveImage(context.Background(), reaperRef)
			dc.RemoveImage(context.Background(), registryRef)
			dc.RemoveImage(context.Background(), lbRef) // build --push tags all four
		})
		var out bytes.Buffer
		start := time.Now()
		if err := run(ctx, []string{"build", "--push", ref}, &out); err != nil {
			t.Fatalf("build --push: %v\n%s", err, out.String())
		}
		t.Logf("build --push %s: %s\n%s", ref, time.Since(start).Round(100*time.Millisecond), out.String())
		// The pushed name itself: the plain tag may move meanwhile.
		want, err := dc.InspectImage(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if want.Labels[lifetime.LabelImageContentHash] == "" {
			t.Fatalf("pushed %s is not a node image: labels %v", ref, want.Labels)
		}
		// Only the pushed names go: the node image stays under its own.
		// The registry image too, kept under a backup name: a cluster
		// WithRegistry must pull it from beside the node image.
		registryImg, err := dc.InspectImage(ctx, images.RegistryImage)
		if err != nil {
			t.Fatal(err)
		}
		backup := "kindtest-test/registry-backup:" + randomName(t)
		if err := dc.TagImage(ctx, images.RegistryImage, backup); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := dc.InspectImage(context.Background(), images.RegistryImage); err != nil {
				dc.TagImage(context.Background(), backup, images.RegistryImage)
			}
			dc.RemoveImage(context.Background(), backup)
		})
		for _, r := range []string{ref, reaperRef, registryRef, images.RegistryImage} {
			if err := dc.RemoveImage(ctx, r); err != nil {
				t.Fatal(err)
			}
			mustBeAbsent(ctx, t, dc, r)
		}
		var logs bytes.Buffer
		var mu sync.Mutex
		logger := kindtest.LoggerFunc(func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&logs, format+"\n", args...)
		})
		start = time.Now()
		c, err := kindtest.New(ctx, kindtest.WithImage(ref), kindtest.WithoutKubernetes(), kindtest.WithLogger(logger), kindtest.WithNamePrefix("pulltest"), kindtest.WithRegistry())
		if err != nil {
			t.Fatalf("cluster from %s: %v\n%s", ref, err, logs.String())
		}
		defer c.Delete(context.Background())
		t.Logf("cluster from the pushed reference in %s:\n%s", time.Since(start).Round(100*time.Millisecond), logs.String())
		got, err := dc.InspectImage(ctx, ref)
		if err != nil || got.ID != want.ID {
			t.Fatalf("pulled %s: ID %s (%v), pushed %s", ref, got.ID, err, want.ID)
		}
		if !strings.Contains(logs.String(), "pulled "+ref) {
			t.Errorf("the log does not say that %s was pulled:\n%s", ref, logs.String())
		}
		// The reaper went beside it. (The engine has the reaper image, so
		// the cluster did not need to pull it.)
		if err := dc.PullImage(ctx, reaperRef, nil); err != nil {
			t.Fatalf("reaper image beside the node image: %v", err)
		}
		reaper, err := dc.InspectImage(ctx, images.ReaperImage)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := dc.InspectImage(ctx, reaperRef); err != nil || got.ID != reaper.ID {
			t.Errorf("pulled %s: ID %s (%v), want %s's %s", reaperRef, got.ID, err, images.ReaperImage, reaper.ID)
		}
		// The registry image came from beside it, for WithRegistry.
		if got, err := dc.InspectImage(ctx, images.RegistryImage); err != nil || got.ID != registryImg.ID {
			t.Errorf("%s after the cluster: ID %s (%v), want the pushed %s", images.RegistryImage, got.ID, err, registryImg.ID)
		}
		if !strings.Contains(logs.String(), "pulled "+registryRef) || !strings.HasPrefix(c.RegistryAddr(), "localhost:") {
			t.Errorf("the registry image was not pulled from %s (registry %q):\n%s", registryRef, c.RegistryAddr(), logs.String())
		}
	})
}

// TestRegistryErrors checks what a user is told when a registry cannot
// serve or take an image, and that nothing is left under the reference.
func TestRegistryErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a registry: not in -short mode")
	}
	dc := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	open := startRegistry(t, "")
	const user, password = "kindtest", "s3cret"
	locked := startRegistry(t, user+":"+password)

	newCluster := func(ref string) error {
		c, err := kindtest.New(ctx, kindtest.WithImage(ref), kindtest.WithoutKubernetes(), kindtest.WithNamePrefix("pulltest"))
		if err == nil {
			c.Delete(context.Background())
		}
		return err
	}
	for name, ref := range map[string]string{
		"unreachable registry": freeAddr(t) + "/kindtest/node:v1",
		"missing tag":          open + "/kindtest/node:no-such-tag",
		"no credentials":       locked + "/kindtest/node:v1",
	} {
		t.Run(name, func(t *testing.T) {
			err := newCluster(ref)
			if err == nil {
				t.Fatalf("cluster from %s: no error", ref)
			}
			msg := err.Error()
			for _, want := range []string{ref, "docker login", "kindtest build", "image load"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q: %s", want, msg)
				}
			}
			t.Logf("%s: %v", name, err)
			mustBeAbsent(ctx, t, dc, ref)
		})
	}

	t.Run("push without permission", func(t *testing.T) {
		local := "kindtest-test/small:" + randomName(t)
		smallImage(ctx, t, dc, local)
		ref := locked + "/kindtest/node:" + randomName(t)
		t.Cleanup(func() { dc.RemoveImage(context.Background(), ref) })
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		var out bytes.Buffer
		err := pushImages(ctx, images.Result{ContentImage: local}, ref, &out)
		if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "docker login "+locked) {
			t.Fatalf("push without credentials: %v", err)
		}
		t.Logf("push without credentials: %v", err)
		info, err := dc.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		native, _ := info.Platform()
		err = dc.PushIndex(ctx, ref+"-index", map[string]string{native: ref})
		if err == nil || !strings.Contains(err.Error(), "wants credentials") {
			t.Errorf("index push without credentials: %v", err)
		}

		// With credentials, as `docker login` stores them, it goes through.
		config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, locked, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
		if err := os.WriteFile(filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := dc.PushImage(ctx, ref, nil); err != nil {
			t.Fatalf("push with credentials: %v", err)
		}
		if err := dc.PushIndex(ctx, ref+"-index", map[string]string{native: ref}); err != nil {
			t.Errorf("index push with credentials: %v", err)
		}

		// With a credential store instead (credsStore), as Docker Desktop
		// and docker-credential-pass users have it, it goes through too.
		helperDir := t.TempDir()
		helper := fmt.Sprintf(`#!/bin/sh
[ "$1" = get ] || exit 1
read -r server
[ "$server" = %q ] || { echo 'credentials not found in native keychain'; exit 1; }
printf '{"Username":%q,"Secret":%q}\n'
`, locked, user, password)
		if err := os.WriteFile(filepath.Join(helperDir, "docker-credential-kttest"), []byte(helper), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", helperDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		if err := os.WriteFile(filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json"), []byte(`{"auths":{},"credsStore":"kttest"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		stored := locked + "/kindtest/node:" + randomName(t)
		t.Cleanup(func() { dc.RemoveImage(context.Background(), stored) })
		if err := dc.TagImage(ctx, local, stored); err != nil {
			t.Fatal(err)
		}
		if err := dc.PushImage(ctx, stored, nil); err != nil {
			t.Fatalf("push with credentials from a credential store: %v", err)
		}
	})
}

// TestImageSaveLoad round-trips an image through `kindtest image save` and
// `kindtest image load`, and feeds load a truncated and a corrupt file.
func TestImageSaveLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("saves and loads images: not in -short mode")
	}
	dc := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ref := "kindtest-test/small:" + randomName(t)
	id := smallImage(ctx, t, dc, ref)
	file := filepath.Join(dir, "images.tar")
	var out bytes.Buffer
	if err := run(ctx, []string{"image", "save", "-o", file, ref}, &out); err != nil {
		t.Fatal(err)
	}
	if err := dc.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	mustBeAbsent(ctx, t, dc, ref)
	if err := run(ctx, []string{"image", "load", file}, &out); err != nil {
		t.Fatal(err)
	}
	if img, err := dc.InspectImage(ctx, ref); err != nil || img.ID != id {
		t.Fatalf("loaded %s: ID %s (%v), saved %s", ref, img.ID, err, id)
	}
	t.Log(out.String())

	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 64<<10)
	rand.Read(garbage)
	// A byte changed inside the layer's data keeps the archive whole; the
	// engine finds the layer's digest wrong.
	flipped := bytes.Clone(whole)
	flipped[len(flipped)/2] ^= 0xff
	for name, data := range map[string][]byte{
		"layer content changed": flipped,
		"truncated":             whole[:len(whole)/2],
		"cut at an entry end":   whole[:1024],
		"corrupt":               garbage,
		"empty":                 nil,
	} {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(dir, "bad.tar")
			if err := os.WriteFile(bad, data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := run(ctx, []string{"image", "load", bad}, &out)
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "image save -o "+bad) {
				t.Fatalf("load of a %s file: %v", name, err)
			}
			t.Logf("%s: %v", name, err)
			mustBeAbsent(ctx, t, dc, ref)
		})
	}
}

// TestNodeImageSaveLoad round-trips the node image through a file, as the
// CI recipe in examples/ci does, and reports how long each way took.
func TestNodeImageSaveLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("saves and loads the node image: not in -short mode")
	}
	dc := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	want, err := dc.InspectImage(ctx, images.DefaultNodeImage)
	if err != nil {
		t.Fatalf("%v (the test command builds it first)", err)
	}
	file := filepath.Join(t.TempDir(), "node.tar")
	var out bytes.Buffer
	if err := run(ctx, []string{"image", "save", "-o", file}, &out); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"image", "load", file}, &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, tag := range want.Tags {
		if !strings.HasPrefix(tag, "kindtest/node:") {
			continue
		}
		if !strings.Contains(out.String(), tag) {
			t.Errorf("%s was not saved and loaded:\n%s", tag, out.String())
		}
	}
	if got, err := dc.InspectImage(ctx, images.DefaultNodeImage); err != nil || got.ID != want.ID {
		t.Errorf("after the load %s is %s (%v), want %s", images.DefaultNodeImage, got.ID, err, want.ID)
	}
}

// TestMissingImageNamesThreeWays checks the error for a node image that is
// not in the engine and names no registry.
func TestMissingImageNamesThreeWays(t *testing.T) {
	enginetest.Client(t)
	ref := "kindtest-test/node:absent-" + randomName(t)
	_, err := kindtest.New(t.Context(), kindtest.WithImage(ref), kindtest.WithoutKubernetes())
	if err == nil {
		t.Fatalf("cluster from %s: no error", ref)
	}
	for _, want := range []string{ref, "kindtest/cmd/kindtest build", "KINDTEST_IMAGE", "--push", "image load FILE", "image save -o FILE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	t.Log(err)
}
