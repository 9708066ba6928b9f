package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTimingPatches patches the Kubernetes modules the checked-in nested
// module requires, as a default build does: every patch applies to this
// version, go resolves the patched packages to the copies, and the copies
// hold the new code. A patch whose code or file the module lacks is left
// out, and the copy is made once.
func TestTimingPatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	modDir, err := filepath.Abs("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	lost := timingPatch{name: "lost", module: kubernetesModule, file: "pkg/registry/rbac/rest/storage_rbac.go", old: "code no version has", new: "x"}
	moved := timingPatch{name: "moved", module: kubernetesModule, file: "pkg/no/such/file.go", old: "x", new: "y"}
	var log strings.Builder
	logger := loggerFunc(func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) })
	modfile, applied, err := patchKubernetes(ctx, logger, modDir, cacheDir, t.TempDir(), append(slices.Clone(timingPatches), lost, moved))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range timingPatches {
		want = append(want, p.name)
	}
	if !slices.Equal(applied, want) {
		t.Errorf("applied %q, want %q", applied, want)
	}
	for _, name := range []string{"lost", "moved"} {
		if !strings.Contains(log.String(), "timing patch "+name+" left out") {
			t.Errorf("the patch %s, which does not apply, is not logged as left out: %q", name, log.String())
		}
	}
	for _, p := range timingPatches {
		pkg := strings.TrimSuffix(p.module+"/"+filepath.ToSlash(filepath.Dir(p.file)), "/.")
		cmd := exec.CommandContext(ctx, "go", "list", "-modfile", modfile, "-f", "{{.Dir}}", pkg)
		cmd.Dir = modDir
		cmd.Env = append(os.Environ(), goEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v: %s", pkg, err, out)
		}
		dir := strings.TrimSpace(string(out))
		if !strings.HasPrefix(dir, filepath.Join(cacheDir, "source")+string(filepath.Separator)) {
			t.Errorf("%s resolves to %s, not to a patched copy under %s", pkg, dir, cacheDir)
			continue
		}
		code, err := os.ReadFile(filepath.Join(dir, filepath.Base(p.file)))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(code), p.new) || strings.Contains(string(code), p.old) {
			t.Errorf("%s in %s: patch %s not applied", p.file, dir, p.name)
		}
	}
	copies, err := os.ReadDir(filepath.Join(cacheDir, "source"))
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]bool{}
	for _, p := range timingPatches {
		modules[p.module] = true
	}
	if len(copies) != len(modules) {
		t.Errorf("%d directories under source, want one copy per patched module (%d): %v", len(copies), len(modules), copies)
	}
	// A second build finds the copies made.
	start := time.Now()
	if _, _, err := patchKubernetes(ctx, logger, modDir, cacheDir, t.TempDir(), timingPatches); err != nil {
		t.Fatal(err)
	}
	t.Logf("patched again in %s", time.Since(start).Round(time.Millisecond))
	if again, _ := os.ReadDir(filepath.Join(cacheDir, "source")); len(again) != len(copies) {
		t.Errorf("a second build made other copies: %v", again)
	}
}

func TestPatchNames(t *testing.T) {
	if got := patchNames(nil); got != "none" {
		t.Errorf("no patches: %q, want none", got)
	}
	if got := patchNames([]string{"a", "b"}); got != "a,b" {
		t.Errorf("two patches: %q, want a,b", got)
	}
}

type loggerFunc func(format string, args ...any)

func (f loggerFunc) Printf(format string, args ...any) { f(format, args...) }
