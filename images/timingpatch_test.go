package images

import (
	"context"
	"errors"
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

// TestTimingPatchesDocumented keeps the two tables that list the patches
// (the README's, for users; images/README.md's, with module and file) and
// the count their text gives in step with timingPatches, the list a build
// applies: a patch added, dropped or renamed there fails here until both
// documents say so.
func TestTimingPatchesDocumented(t *testing.T) {
	var want []string
	for _, p := range timingPatches {
		want = append(want, p.name)
	}
	count := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	if len(want) >= len(count) {
		t.Fatalf("%d patches: extend this test's number words", len(want))
	}
	for _, doc := range []struct{ file, lead string }{
		{"../README.md", "carries " + count[len(want)] + " patches"},
		{"README.md", "built with " + count[len(want)] + " **timing patches**"},
	} {
		b, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if !strings.Contains(text, doc.lead) {
			t.Errorf("%s does not say %q (%d patches in timingPatches)", doc.file, doc.lead, len(want))
		}
		names, err := patchTable(text)
		if err != nil {
			t.Errorf("%s: %v", doc.file, err)
			continue
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s's patch table lists %q, timingPatches %q", doc.file, names, want)
		}
	}
}

// patchTable returns the names in the first column of the Markdown table
// whose header starts with "| patch |".
func patchTable(text string) ([]string, error) {
	_, table, ok := strings.Cut(text, "\n| patch |")
	if !ok {
		return nil, errors.New("no table whose header starts with \"| patch |\"")
	}
	lines := strings.Split(table, "\n")[2:] // the header's rest and its rule
	var names []string
	for _, line := range lines {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		name, ok := strings.CutPrefix(cell, "`")
		name, ok2 := strings.CutSuffix(name, "`")
		if !ok || !ok2 {
			return nil, fmt.Errorf("row %q: the first cell is not a `name`", line)
		}
		names = append(names, name)
	}
	return names, nil
}

type loggerFunc func(format string, args ...any)

func (f loggerFunc) Printf(format string, args ...any) { f(format, args...) }
