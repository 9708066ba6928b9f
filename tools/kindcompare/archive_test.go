package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

func TestRenameArchive(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	manifest := `[{"Config":"c.json","RepoTags":["kindtest-kind/etcd:abc"],"Layers":["l/layer.tar"]}]`
	for _, e := range []struct{ name, data string }{
		{"l/layer.tar", "layer"},
		{"manifest.json", manifest},
		{"repositories", `{"kindtest-kind/etcd":{"abc":"1234"}}`},
	} {
		if err := writeEntry(tw, e.name, []byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()

	var out bytes.Buffer
	ow := tar.NewWriter(&out)
	if err := renameArchive(ow, &in, map[string]string{"kindtest-kind/etcd:abc": "registry.k8s.io/etcd:3.7.0-0"}); err != nil {
		t.Fatal(err)
	}
	ow.Close()

	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[hdr.Name] = string(data)
	}
	if _, ok := got["repositories"]; ok {
		t.Error("the saved repositories file was copied; the archive's own comes first")
	}
	if got["l/layer.tar"] != "layer" {
		t.Errorf("layer = %q", got["l/layer.tar"])
	}
	var m []struct {
		Config   string
		RepoTags []string
	}
	if err := json.Unmarshal([]byte(got["manifest.json"]), &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || m[0].Config != "c.json" || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "registry.k8s.io/etcd:3.7.0-0" {
		t.Errorf("manifest.json = %s", got["manifest.json"])
	}
}

func TestRenameManifestRefusesUnknownImage(t *testing.T) {
	if _, err := renameManifest([]byte(`[{"RepoTags":["other:1"]}]`), map[string]string{}); err == nil {
		t.Error("an image not asked for was renamed silently")
	}
}

func TestSplitRef(t *testing.T) {
	for ref, want := range map[string][2]string{
		"registry.k8s.io/etcd:3.7.0-0":       {"registry.k8s.io/etcd", "3.7.0-0"},
		"localhost:5000/x":                   {"localhost:5000/x", "latest"},
		"docker.io/kindest/kindnetd:v2026-1": {"docker.io/kindest/kindnetd", "v2026-1"},
	} {
		if r, tag := splitRef(ref); r != want[0] || tag != want[1] {
			t.Errorf("splitRef(%q) = %q, %q", ref, r, tag)
		}
	}
}
