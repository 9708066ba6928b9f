package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestRelocateSnapshots(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	add := func(hdr *tar.Header, body string) {
		hdr.Size = int64(len(body))
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	snaps := "containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/"
	add(&tar.Header{Name: "containerd/", Typeflag: tar.TypeDir, Mode: 0o711}, "")
	add(&tar.Header{Name: "containerd/io.containerd.metadata.v1.bolt/meta.db", Typeflag: tar.TypeReg, Mode: 0o644}, "db")
	add(&tar.Header{Name: snaps, Typeflag: tar.TypeDir, Mode: 0o700}, "")
	add(&tar.Header{Name: snaps + "4/", Typeflag: tar.TypeDir, Mode: 0o700}, "")
	add(&tar.Header{Name: snaps + "4/fs/usr/bin/perl", Typeflag: tar.TypeReg, Mode: 0o755}, "#!")
	add(&tar.Header{Name: snaps + "4/fs/usr/bin/perl5", Typeflag: tar.TypeLink, Linkname: snaps + "4/fs/usr/bin/perl"}, "")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := relocateSnapshots(&in, &out); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		typ  byte
		link string
		body string
	}
	got := map[string]entry{}
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[hdr.Name] = entry{hdr.Typeflag, hdr.Linkname, string(body)}
	}
	want := map[string]entry{
		"var/lib/containerd/": {typ: tar.TypeDir},
		"var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db": {typ: tar.TypeReg, body: "db"},
		"var/lib/" + snaps:                                     {typ: tar.TypeDir},
		"var/lib/" + snaps + "4":                               {typ: tar.TypeSymlink, link: "/opt/kindtest/containerd-snapshots/4"},
		"opt/kindtest/containerd-snapshots/4/":                 {typ: tar.TypeDir},
		"opt/kindtest/containerd-snapshots/4/fs/usr/bin/perl":  {typ: tar.TypeReg, body: "#!"},
		"opt/kindtest/containerd-snapshots/4/fs/usr/bin/perl5": {typ: tar.TypeLink, link: "opt/kindtest/containerd-snapshots/4/fs/usr/bin/perl"},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %+v (present %t), want %+v", name, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d entries, want %d: %v", len(got), len(want), got)
	}
}
