package kindtest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReuseLockUnderASpacedTempDir: the reuse lock lives under the OS's
// temporary directory, which on macOS and Windows is per user and may
// have spaces in its path (C:\Users\Jane Doe\AppData\Local\Temp).
func TestReuseLockUnderASpacedTempDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Jane Doe", "Temp")
	for _, v := range []string{"TMPDIR", "TMP", "TEMP"} { // Unix, Windows
		t.Setenv(v, dir)
	}
	const name = "kt-0123abcd"
	if p := reuseLockPath(name); !strings.HasPrefix(p, dir) {
		t.Fatalf("reuse lock %s is not under the temporary directory %s", p, dir)
	}
	l, ok, err := reuseLock(name)
	if err != nil || !ok {
		t.Fatalf("reuse lock under %s: held %t, %v", dir, ok, err)
	}
	defer l.Unlock()
	if _, ok, err := reuseLock(name); err != nil || ok {
		t.Fatalf("second reuse lock while the first is held: held %t, %v", ok, err)
	}
}
