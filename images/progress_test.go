package images

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type recordLogger struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordLogger) Printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// TestGoBuildReportsProgress runs a real go build with a short progress
// interval and checks the lines a long build would print.
func TestGoBuildReportsProgress(t *testing.T) {
	old := progressInterval
	progressInterval = 20 * time.Millisecond
	t.Cleanup(func() { progressInterval = old })

	dir := t.TempDir()
	b := make([]byte, 8)
	rand.Read(b)
	// A constant of its own, so that the main package is compiled, not cached.
	files := map[string]string{
		"go.mod":  "module example.com/progress\n\ngo 1.26\n",
		"main.go": fmt.Sprintf("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(%q) }\n", hex.EncodeToString(b)),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log recordLogger
	if err := goBuild(t.Context(), &log, "progress", dir, nil, "-o", filepath.Join(dir, "bin"), "."); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(log.lines, "\n")
	if !strings.Contains(all, "  building progress: ") || !strings.Contains(all, "packages compiled so far") {
		t.Errorf("no progress line:\n%s", all)
	}
	last := log.lines[len(log.lines)-1]
	if !strings.HasPrefix(last, "  built progress in ") || strings.Contains(last, "(0 packages") {
		t.Errorf("last line %q: want the build's end, with the main package compiled", last)
	}

	// A failing build keeps the compiler's message.
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { undefinedThing() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := goBuild(t.Context(), &log, "progress", dir, nil, "-o", filepath.Join(dir, "bin"), ".")
	if err == nil || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("failing build: %v", err)
	}
}
