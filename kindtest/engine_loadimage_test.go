package kindtest_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// TestLoadImagePlatforms loads images into a node and runs them there with
// ctr: a single-platform image, a multi-platform index with every
// platform's content, and a multi-platform index with only this platform's
// content, which is what `docker save` writes under the containerd image
// store for a pulled multi-platform image (kind#3795). On a classic-store
// engine `docker load` keeps only this platform of each; under the
// containerd store the index is kept.
func TestLoadImagePlatforms(t *testing.T) {
	dc := engine(t)
	hello := buildHello(t)
	c := start(t, dc, kindtest.WithoutKubernetes())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	for _, tc := range []struct {
		name      string
		platforms []string // the first is this machine's
		missing   bool     // leave out the other platforms' blobs
	}{
		{"single", []string{runtime.GOARCH}, false},
		{"multi-platform", []string{runtime.GOARCH, other}, false},
		{"multi-platform-partial", []string{runtime.GOARCH, other}, true},
		// What `docker save` of Docker 20.10 writes: manifest.json alone.
		// podman files the image it loads from one under localhost/.
		{"docker-archive", []string{runtime.GOARCH}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := fmt.Sprintf("kindtest/platforms-%s:%x", tc.name, suffix)
			archive := ociArchive(t, ref, hello, tc.platforms, tc.missing)
			if tc.name == "docker-archive" {
				archive = withoutOCILayout(t, archive)
			}
			if _, err := dc.LoadImages(ctx, bytes.NewReader(archive)); err != nil {
				t.Fatalf("docker load: %v", err)
			}
			t.Cleanup(func() { _ = dc.RemoveImage(context.Background(), ref) })
			if err := c.LoadImage(ctx, ref); err != nil {
				t.Fatal(err)
			}
			n := c.ControlPlane()
			res, err := n.Exec(ctx, "ctr", "-n", "k8s.io", "run", "--rm", "docker.io/"+ref, fmt.Sprintf("kt-hello-%x", suffix), "/hello")
			want := "hello from linux/" + runtime.GOARCH
			if err != nil || strings.TrimSpace(res.Stdout) != want {
				t.Fatalf("ran the loaded image: %q (%v), want %q", res.Stdout, err, want)
			}
		})
	}
}

// withoutOCILayout is archive without its OCI layout files (oci-layout,
// index.json): a Docker archive, named by its manifest.json alone.
func withoutOCILayout(t *testing.T, archive []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	tr := tar.NewReader(bytes.NewReader(archive))
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "oci-layout" || h.Name == "index.json" {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// buildHello compiles a static program that prints its platform.
func buildHello(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"runtime\"\n)\n\nfunc main() { fmt.Println(\"hello from \" + runtime.GOOS + \"/\" + runtime.GOARCH) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", "hello", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// ociArchive makes a `docker save` style archive (OCI layout plus Docker's
// manifest.json) of ref: an index of one image per platform, each a single
// layer with /hello. The first platform's layer holds the real program;
// the others hold a file that only names them. With missing, only the
// first platform's blobs are in the archive.
func ociArchive(t *testing.T, ref string, hello []byte, platforms []string, missing bool) []byte {
	t.Helper()
	blobs := map[string][]byte{}
	add := func(b []byte) string {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return d
	}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var manifests []descriptor
	var first struct{ config, layer string }
	keep := map[string]bool{}
	for i, arch := range platforms {
		content := hello
		if i > 0 {
			content = []byte("#!/bin/false\n# " + ref + " for linux/" + arch + "\n")
		}
		var layer bytes.Buffer
		tw := tar.NewWriter(&layer)
		if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o755, Size: int64(len(content)), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(content); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		layerDigest := add(layer.Bytes())
		config := mustJSON(map[string]any{
			"architecture": arch,
			"os":           "linux",
			"config":       map[string]any{"Entrypoint": []string{"/hello"}},
			"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		})
		configDigest := add(config)
		manifest := mustJSON(map[string]any{
			"schemaVersion": 2,
			"mediaType":     "application/vnd.oci.image.manifest.v1+json",
			"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: configDigest, Size: len(config)},
			"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: layer.Len()}},
		})
		manifestDigest := add(manifest)
		manifests = append(manifests, descriptor{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: manifestDigest, Size: len(manifest),
			Platform: &platform{Architecture: arch, OS: "linux"},
		})
		if i == 0 {
			first.config, first.layer = configDigest, layerDigest
		}
		if i == 0 || !missing {
			keep[layerDigest], keep[configDigest], keep[manifestDigest] = true, true, true
		}
	}
	repo, tag, _ := strings.Cut(ref, ":")
	annotations := map[string]string{
		"io.containerd.image.name":          "docker.io/" + ref,
		"org.opencontainers.image.ref.name": tag,
	}
	top := manifests[0]
	if len(platforms) > 1 {
		index := mustJSON(map[string]any{
			"schemaVersion": 2,
			"mediaType":     "application/vnd.oci.image.index.v1+json",
			"manifests":     manifests,
		})
		d := add(index)
		keep[d] = true
		top = descriptor{MediaType: "application/vnd.oci.image.index.v1+json", Digest: d, Size: len(index)}
	}
	top.Platform = nil
	top.Annotations = annotations
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": mustJSON(map[string]any{
			"schemaVersion": 2,
			"mediaType":     "application/vnd.oci.image.index.v1+json",
			"manifests":     []descriptor{top},
		}),
		"manifest.json": mustJSON([]map[string]any{{
			"Config":   "blobs/sha256/" + strings.TrimPrefix(first.config, "sha256:"),
			"RepoTags": []string{repo + ":" + tag},
			"Layers":   []string{"blobs/sha256/" + strings.TrimPrefix(first.layer, "sha256:")},
		}}),
	}
	for d, b := range blobs {
		if keep[d] {
			files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] = b
		}
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
