package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Rewriting `docker save` archives: under other names (RetagArchive), and
// with another platform in an image's configuration (SetImagePlatform).
// Both formats engines write are handled: the legacy one (manifest.json,
// repositories, <id>.json) and the OCI layout Docker 25 and later add
// (index.json, blobs/sha256/...), which carries manifest.json too.

// saveManifest is one entry of an archive's manifest.json.
type saveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// RetagArchive copies the `docker save` archive r to w with the images
// named by the keys of renames (as the docker CLI shows them,
// "kindtest/node:v1.37.2-arm64") under the values instead. Names not in
// renames stay; the layers and configurations are copied unchanged.
func RetagArchive(r io.Reader, w io.Writer, renames map[string]string) error {
	for from, to := range renames {
		if _, _, ok := splitRef(to); !ok {
			return fmt.Errorf("retag archive: %q (for %s) is not a name:tag reference", to, from)
		}
	}
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("retag archive: read: %w", err)
		}
		var rewrite func([]byte, map[string]string) ([]byte, error)
		switch hdr.Name {
		case "manifest.json":
			rewrite = retagManifest
		case "repositories":
			rewrite = retagRepositories
		case "index.json":
			rewrite = retagIndex
		}
		if rewrite == nil || hdr.Typeflag != tar.TypeReg {
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("retag archive: write: %w", err)
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("retag archive: copy %s: %w", hdr.Name, err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("retag archive: read %s: %w", hdr.Name, err)
		}
		if data, err = rewrite(data, renames); err != nil {
			return fmt.Errorf("retag archive: %s: %w", hdr.Name, err)
		}
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("retag archive: write: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("retag archive: write %s: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("retag archive: write: %w", err)
	}
	return nil
}

func retagManifest(data []byte, renames map[string]string) ([]byte, error) {
	var m []saveManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for i := range m {
		for j, tag := range m[i].RepoTags {
			if to, ok := renames[familiar(tag)]; ok {
				m[i].RepoTags[j] = to
			}
		}
	}
	return json.Marshal(m)
}

// retagRepositories rewrites the legacy repositories file: repository ->
// tag -> top layer id.
func retagRepositories(data []byte, renames map[string]string) ([]byte, error) {
	var repos map[string]map[string]string
	if err := json.Unmarshal(data, &repos); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for repo, tags := range repos {
		for tag, id := range tags {
			name, newTag := repo, tag
			if to, ok := renames[familiar(repo+":"+tag)]; ok {
				name, newTag, _ = splitRef(to)
			}
			if out[name] == nil {
				out[name] = map[string]string{}
			}
			out[name][newTag] = id
		}
	}
	return json.Marshal(out)
}

// Annotations an OCI index in a `docker save` archive names images with:
// the full reference (containerd's) and the tag alone (the OCI one).
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

func retagIndex(data []byte, renames map[string]string) ([]byte, error) {
	var index map[string]json.RawMessage
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, err
	}
	raw, ok := index["manifests"]
	if !ok {
		return data, nil
	}
	var manifests []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &manifests); err != nil {
		return nil, err
	}
	for _, m := range manifests {
		var annotations map[string]string
		if a, ok := m["annotations"]; !ok || json.Unmarshal(a, &annotations) != nil {
			continue
		}
		to, ok := renames[familiar(annotations[annotationImageName])]
		if !ok {
			continue
		}
		annotations[annotationImageName] = qualify(to)
		if _, ok := annotations[annotationRefName]; ok {
			_, tag, _ := splitRef(to)
			annotations[annotationRefName] = tag
		}
		a, err := json.Marshal(annotations)
		if err != nil {
			return nil, err
		}
		m["annotations"] = a
	}
	encoded, err := json.Marshal(manifests)
	if err != nil {
		return nil, err
	}
	index["manifests"] = encoded
	return json.Marshal(index)
}

// splitRef splits "name:tag" at the tag's colon (a registry's port is no
// tag).
func splitRef(ref string) (name, tag string, ok bool) {
	i := strings.LastIndexByte(ref, ':')
	if i <= strings.LastIndexByte(ref, '/') {
		return ref, "", false
	}
	return ref[:i], ref[i+1:], true
}

// familiar returns a reference as the docker CLI shows it: without
// docker.io/ and library/.
func familiar(ref string) string {
	ref = strings.TrimPrefix(ref, "docker.io/")
	if rest, ok := strings.CutPrefix(ref, "library/"); ok && !strings.Contains(rest, "/") {
		return rest
	}
	return ref
}

// qualify returns a reference in full, as containerd names images:
// "kindtest/node:v1" is "docker.io/kindtest/node:v1".
func qualify(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return ref
	}
	if !found {
		return "docker.io/library/" + ref
	}
	return "docker.io/" + ref
}

// SetImagePlatform makes the image ref's configuration name platform
// ("linux/arm64" or "linux/arm/v7"). Engines before 23.0 give an imported
// root file system their own architecture whatever the import asks for;
// this rewrites the configuration of such an image (`docker save`, a new
// configuration, `docker load` under the same name). The layers are not
// changed. An image that names the platform already is left alone.
func (c *Client) SetImagePlatform(ctx context.Context, ref, platform string) error {
	img, err := c.InspectImage(ctx, ref)
	if err != nil {
		return err
	}
	if img.Platform == platform {
		return nil
	}
	stale, staleP := img.ID, img.Platform
	goos, arch, ok := strings.Cut(platform, "/")
	arch, variant, _ := strings.Cut(arch, "/")
	if !ok || goos == "" || arch == "" {
		return fmt.Errorf("set platform of %s: %q is no os/arch platform", ref, platform)
	}
	tmp, err := os.CreateTemp("", "kindtest-relabel-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	saved, err := c.SaveImages(ctx, []string{ref})
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, saved)
	saved.Close()
	if err != nil {
		return fmt.Errorf("set platform of %s: save: %w", ref, err)
	}
	relabelled, w := io.Pipe()
	go func() {
		w.CloseWithError(relabelArchive(tmp, w, ref, map[string]string{"os": goos, "architecture": arch, "variant": variant}))
	}()
	_, err = c.LoadImages(ctx, relabelled)
	relabelled.Close()
	if err != nil {
		return fmt.Errorf("set platform of %s: %w", ref, err)
	}
	if img, err = c.InspectImage(ctx, ref); err != nil {
		return err
	}
	if img.Platform != platform {
		return fmt.Errorf("set platform of %s: the engine still reports %s after loading it for %s", ref, img.Platform, platform)
	}
	// The load moved ref to the relabelled image; the engine's own copy,
	// now without a name, would stay behind as a dangling image.
	if img.ID != stale {
		if err := c.RemoveImage(ctx, stale); err != nil {
			return fmt.Errorf("set platform of %s: the engine's %s copy: %w", ref, staleP, err)
		}
	}
	return nil
}

// smallFile is the largest archive member relabelArchive keeps in memory
// while it looks for the image's configuration.
const smallFile = 4 << 20

// relabelArchive writes a `docker save` archive (in f, holding one image)
// to w in the legacy layout, with fields set in the image's configuration
// ("" removes one) and the configuration stored under its new digest.
// index.json and repositories are left out, so that engines load the
// archive by its manifest.json; the layers are copied as they are.
func relabelArchive(f io.ReadSeeker, w io.Writer, ref string, fields map[string]string) error {
	small := map[string][]byte{}
	if err := eachMember(f, func(hdr *tar.Header, r io.Reader) error {
		if hdr.Typeflag == tar.TypeReg && hdr.Size <= smallFile {
			data, err := io.ReadAll(r)
			small[hdr.Name] = data
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	var manifest []saveManifest
	if err := json.Unmarshal(small["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		return fmt.Errorf("the saved archive has no manifest.json for one image (%v)", err)
	}
	config, ok := small[manifest[0].Config]
	if !ok {
		return fmt.Errorf("the saved archive lacks the configuration %s", manifest[0].Config)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("configuration %s: %w", manifest[0].Config, err)
	}
	for k, v := range fields {
		if v == "" {
			delete(cfg, k)
			continue
		}
		cfg[k], _ = json.Marshal(v)
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(config)
	oldConfig := manifest[0].Config
	manifest[0].Config = hex.EncodeToString(sum[:]) + ".json"
	manifest[0].RepoTags = []string{familiar(ref)}
	manifestData, err := json.Marshal(manifest)
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	for _, file := range []struct {
		name string
		data []byte
	}{{manifest[0].Config, config}, {"manifest.json", manifestData}} {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Mode: 0o644, Size: int64(len(file.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(file.data); err != nil {
			return err
		}
	}
	skip := map[string]bool{"manifest.json": true, "repositories": true, "index.json": true, "oci-layout": true, oldConfig: true}
	if err := eachMember(f, func(hdr *tar.Header, r io.Reader) error {
		if skip[hdr.Name] {
			return nil
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}); err != nil {
		return err
	}
	return tw.Close()
}

// eachMember calls fn for every member of the tar archive in f, from its
// start.
func eachMember(f io.ReadSeeker, fn func(*tar.Header, io.Reader) error) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the saved archive: %w", err)
		}
		if err := fn(hdr, tr); err != nil {
			return err
		}
	}
}
