package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
)

// tarOf makes a tar archive of regular files, name -> content, in order.
func tarOf(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// members reads a tar archive into name -> content.
func members(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = string(b)
	}
}

// TestRetagArchiveFormats renames in both layouts engines write, the
// legacy one and the OCI one of Docker 25 and later, and leaves other
// names and the blobs alone.
func TestRetagArchiveFormats(t *testing.T) {
	in := tarOf(t,
		[2]string{"blobs/sha256/aa", "layer"},
		[2]string{"manifest.json", `[{"Config":"blobs/sha256/cc","RepoTags":["kindtest/node:v1-arm64","other:1"],"Layers":["blobs/sha256/aa"]}]`},
		[2]string{"repositories", `{"kindtest/node":{"v1-arm64":"aa"},"other":{"1":"bb"}}`},
		[2]string{"index.json", `{"schemaVersion":2,"manifests":[` +
			`{"digest":"sha256:dd","annotations":{"io.containerd.image.name":"docker.io/kindtest/node:v1-arm64","org.opencontainers.image.ref.name":"v1-arm64"}},` +
			`{"digest":"sha256:ee","annotations":{"io.containerd.image.name":"docker.io/library/other:1"}}]}`},
	)
	var out bytes.Buffer
	if err := docker.RetagArchive(bytes.NewReader(in), &out, map[string]string{"kindtest/node:v1-arm64": "kindtest/node:v1"}); err != nil {
		t.Fatal(err)
	}
	got := members(t, out.Bytes())
	if got["blobs/sha256/aa"] != "layer" {
		t.Errorf("layer changed: %q", got["blobs/sha256/aa"])
	}
	var manifest []struct{ RepoTags []string }
	if err := json.Unmarshal([]byte(got["manifest.json"]), &manifest); err != nil || len(manifest) != 1 ||
		strings.Join(manifest[0].RepoTags, " ") != "kindtest/node:v1 other:1" {
		t.Errorf("manifest.json: %s (%v)", got["manifest.json"], err)
	}
	var repos map[string]map[string]string
	if err := json.Unmarshal([]byte(got["repositories"]), &repos); err != nil || repos["kindtest/node"]["v1"] != "aa" ||
		repos["kindtest/node"]["v1-arm64"] != "" || repos["other"]["1"] != "bb" {
		t.Errorf("repositories: %s (%v)", got["repositories"], err)
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal([]byte(got["index.json"]), &index); err != nil || len(index.Manifests) != 2 {
		t.Fatalf("index.json: %s (%v)", got["index.json"], err)
	}
	if a := index.Manifests[0].Annotations; a["io.containerd.image.name"] != "docker.io/kindtest/node:v1" || a["org.opencontainers.image.ref.name"] != "v1" {
		t.Errorf("index.json renamed image: %v", a)
	}
	if a := index.Manifests[1].Annotations; a["io.containerd.image.name"] != "docker.io/library/other:1" {
		t.Errorf("index.json other image: %v", a)
	}

	if err := docker.RetagArchive(bytes.NewReader(in), io.Discard, map[string]string{"kindtest/node:v1-arm64": "kindtest/node"}); err == nil ||
		!strings.Contains(err.Error(), "not a name:tag") {
		t.Errorf("rename to a name without tag: %v, want refused", err)
	}
}

// TestForeignPlatformImage imports a root file system for another
// architecture than the engine's, builds on it and moves it under another
// name through a saved archive, on the real engine: the platform survives
// each step, as the node image builder needs for -platform.
func TestForeignPlatformImage(t *testing.T) {
	dc := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := dc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	native, _ := info.Platform()
	foreign := "linux/arm64"
	if native == foreign {
		foreign = "linux/amd64"
	}
	repo := "kindtest-test/platform-" + uuid.NewString()[:8]
	base, built, renamed := repo+":base", repo+":built", repo+":renamed"
	t.Cleanup(func() {
		for _, ref := range []string{base, built, renamed} {
			_ = dc.RemoveImage(context.Background(), ref)
		}
	})

	rootfs := tarOf(t, [2]string{"etc/hostname", "kindtest\n"})
	mark := map[string]string{"dev.kindtest.test": repo}
	if err := dc.ImportImageFor(ctx, bytes.NewReader(rootfs), base, foreign, []string{`CMD ["/bin/true"]`, "LABEL dev.kindtest.test=" + repo}); err != nil {
		t.Fatal(err)
	}
	img, err := dc.InspectImage(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if img.Platform != foreign {
		t.Fatalf("imported %s is for %s, want %s", base, img.Platform, foreign)
	}
	// An engine that imports for its own platform gets the image relabelled;
	// its first import must not stay behind as a dangling image.
	if ids, err := dc.ListImageIDs(ctx, mark); err != nil || len(ids) != 1 || ids[0] != img.ID {
		t.Errorf("images of the import: %v (%v), want only %s's %s", ids, err, base, img.ID)
	}

	buildContext := tarOf(t, [2]string{"Dockerfile", "FROM " + base + "\nCOPY file /file\n"}, [2]string{"file", "x"})
	var out bytes.Buffer
	if err := dc.BuildImage(ctx, bytes.NewReader(buildContext), docker.BuildSpec{Tags: []string{built}, Dockerfile: "Dockerfile", Platform: foreign}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if img, err := dc.InspectImage(ctx, built); err != nil || img.Platform != foreign {
		t.Fatalf("image built FROM %s is for %s (%v), want %s", base, img.Platform, err, foreign)
	}

	saved, err := dc.SaveImages(ctx, []string{built})
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	err = docker.RetagArchive(saved, &archive, map[string]string{built: renamed})
	saved.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.RemoveImage(ctx, built); err != nil {
		t.Fatal(err)
	}
	loaded, err := dc.LoadImages(ctx, &archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 1 || loaded[0] != renamed {
		t.Errorf("loaded %v, want [%s]", loaded, renamed)
	}
	if img, err := dc.InspectImage(ctx, renamed); err != nil || img.Platform != foreign {
		t.Errorf("renamed image: %+v, %v; want one for %s", img, err, foreign)
	}
	if _, err := dc.InspectImage(ctx, built); !docker.IsNotFound(err) {
		t.Errorf("the archive still loads the old name %s: %v", built, err)
	}
}
