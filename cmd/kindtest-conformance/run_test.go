package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGinkgoArgs(t *testing.T) {
	o := options{focus: `\[sig-network\] Services`, skip: "NodePort", timeout: 2 * time.Hour}
	args := ginkgoArgs(o, "Conformance && !Serial", 4, "/out/junit-parallel.xml")
	for _, want := range []string{"--nodes=4", "--label-filter=Conformance && !Serial", "--timeout=2h0m0s",
		"--junit-report=/out/junit-parallel.xml", `--focus=\[sig-network\] Services`, "--skip=NodePort"} {
		if !slices.Contains(args, want) {
			t.Errorf("ginkgo args %q lack %q", args, want)
		}
	}
	for _, a := range args {
		// ginkgo joins --output-dir in front of the report's path.
		if strings.HasPrefix(a, "--output-dir") {
			t.Errorf("ginkgo args %q have %s", args, a)
		}
	}
	if a := ginkgoArgs(options{}, "Conformance && Serial", 1, "/r.xml"); slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--focus") || strings.HasPrefix(s, "--skip") }) {
		t.Errorf("no focus or skip given, yet %q", a)
	}
}

func TestE2EArgs(t *testing.T) {
	args := e2eArgs("/k/kubeconfig", "/b/kubectl", "/out/parallel", 2)
	want := []string{"--kubeconfig=/k/kubeconfig", "--provider=skeleton", "--kubectl-path=/b/kubectl", "--report-dir=/out/parallel", "--disable-log-dump=true", "--num-nodes=2"}
	if !slices.Equal(args, want) {
		t.Fatalf("e2e args %q, want %q", args, want)
	}
	if slices.Contains(e2eArgs("k", "c", "r", 0), "--num-nodes=0") {
		t.Fatal("--num-nodes=0 for a one-node cluster: the framework's default detects the nodes")
	}
}

func TestBusyboxTar(t *testing.T) {
	var buf bytes.Buffer
	if err := busyboxTar(&buf, []byte("ELF"), []string{"sh", "busybox", "wget", "ls"}); err != nil {
		t.Fatal(err)
	}
	got := tarHeaders(t, &buf)
	if h := got["bin/busybox"]; h == nil || h.Mode != 0o755 || h.Size != 3 {
		t.Fatalf("bin/busybox %+v", h)
	}
	for _, a := range []string{"sh", "wget", "ls"} {
		if h := got["bin/"+a]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s: %+v", a, h)
		}
	}
	if h := got["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ %+v", h)
	}
	if got["etc/passwd"] == nil || got["etc/group"] == nil {
		t.Error("no /etc/passwd or /etc/group")
	}
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseFlags([]string{"-workers", "3", "-focus", "x", "-cache-dir", "/c"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.workers != 3 || o.controlPlane != 1 || o.focus != "x" || o.parallel != 4 || !o.parallelRun || !o.serial || o.cacheDir != "/c" {
		t.Fatalf("options %+v", o)
	}
	if _, err := parseFlags([]string{"-parallel", "0"}, &stderr); err == nil {
		t.Fatal("-parallel 0 accepted")
	}
	if _, err := parseFlags([]string{"extra"}, &stderr); err == nil {
		t.Fatal("a stray argument accepted")
	}
}

func TestDownload(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/src.tar" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "source")
	}))
	defer srv.Close()
	sum := sha256.Sum256([]byte("source"))
	good := hex.EncodeToString(sum[:])
	path := filepath.Join(t.TempDir(), "src.tar")
	if err := download(t.Context(), srv.URL+"/src.tar", good, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "source" {
		t.Fatalf("downloaded %q, %v", b, err)
	}
	bad := strings.Repeat("0", 64)
	if err := download(t.Context(), srv.URL+"/src.tar", bad, path); err == nil || !strings.Contains(err.Error(), "want "+bad) {
		t.Errorf("a wrong checksum: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a download with the wrong checksum is left at %s: %v", path, err)
	}
	if err := download(t.Context(), srv.URL+"/gone", good, path); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing file: %v", err)
	}
}
