package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// imageRef is an image built here under local, to be named target in the
// node; id is the engine's image ID.
type imageRef struct {
	local, target, id string
}

// writeImageArchive writes the `docker save` archive of refs to path,
// renamed to their targets. Targets are not tagged on the engine itself,
// where they would replace the images of the same name kindtest builds.
//
// kind's node-image build takes from a release tarball only the names
// that the first manifest.json entry of each image archive carries, or,
// when the archive's "repositories" file comes first, every name that
// file lists; an image it wants and finds under no such name it pulls,
// which fails offline. So the archive starts with a "repositories" file
// that lists every target; containerd's import reads manifest.json.
func writeImageArchive(ctx context.Context, path string, refs []imageRef) (err error) {
	names := map[string]string{}
	repos := map[string]map[string]string{}
	for _, r := range refs {
		if r.id == "" {
			return fmt.Errorf("image %s: no ID", r.local)
		}
		names[r.local] = r.target
		repo, tag := splitRef(r.target)
		if repos[repo] == nil {
			repos[repo] = map[string]string{}
		}
		repos[repo][tag] = strings.TrimPrefix(r.id, "sha256:")
	}
	reposJSON, err := json.Marshal(repos)
	if err != nil {
		return err
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	tw := tar.NewWriter(f)
	if err := writeEntry(tw, "repositories", reposJSON); err != nil {
		return err
	}

	args := []string{"save"}
	for _, r := range refs {
		args = append(args, r.local)
	}
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	copyErr := renameArchive(tw, out, names)
	if copyErr != nil {
		_, _ = io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("docker save: %w\n%s", err, stderr.String())
	}
	if copyErr != nil {
		return copyErr
	}
	return tw.Close()
}

// renameArchive copies the entries of the docker save archive in to tw,
// but for "repositories" (already written), with the RepoTags of
// manifest.json renamed by names.
func renameArchive(tw *tar.Writer, in io.Reader, names map[string]string) error {
	tr := tar.NewReader(in)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read docker save archive: %w", err)
		}
		switch hdr.Name {
		case "repositories":
			continue
		case "manifest.json":
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if data, err = renameManifest(data, names); err != nil {
				return err
			}
			if err := writeEntry(tw, hdr.Name, data); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// renameManifest renames the RepoTags of a docker save manifest.json,
// keeping every other field as it is.
func renameManifest(data []byte, names map[string]string) ([]byte, error) {
	var entries []map[string]any
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("parse manifest.json: %w", err)
	}
	for _, e := range entries {
		tags, _ := e["RepoTags"].([]any)
		for i, t := range tags {
			s, _ := t.(string)
			target, ok := names[s]
			if !ok {
				return nil, fmt.Errorf("manifest.json names %q, which is not one of the images saved", s)
			}
			tags[i] = target
		}
	}
	return json.Marshal(entries)
}

func writeEntry(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// splitRef splits an image reference into repository and tag.
func splitRef(ref string) (repo, tag string) {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}
