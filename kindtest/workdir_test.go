package kindtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

func TestWorkDirCluster(t *testing.T) {
	for base, want := range map[string]string{
		"kindtest-kt-089433d0-344466533": "kt-089433d0",
		"kindtest-my-suite-12":           "my-suite",
		"kindtest-kt-089433d0-":          "",
		"kindtest-kt-089433d0-x1":        "",
		"kindtest-reuse":                 "",
		"kindtest--12":                   "",
		"other-kt-089433d0-1":            "",
		"kindtest-Bad_Name-1":            "",
	} {
		got, ok := workDirCluster(base)
		if got != want || ok != (want != "") {
			t.Errorf("workDirCluster(%q) = %q, %v; want %q", base, got, ok, want)
		}
	}
}

func TestParseWorkDirOwner(t *testing.T) {
	for s, want := range map[string]string{
		"123 456\n": "123/456",
		"123\n":     "123/",
		"":          "-",
		"0 1":       "-",
		"x 1":       "-",
		"1 2 3":     "-",
	} {
		pid, start, ok := parseWorkDirOwner(s)
		got := "-"
		if ok {
			got = fmt.Sprintf("%d/%s", pid, start)
		}
		if got != want {
			t.Errorf("parseWorkDirOwner(%q) = %s; want %s", s, got, want)
		}
	}
}

// workDirs lists the directories in tmp.
func workDirs(t *testing.T, tmp string) []string {
	t.Helper()
	es, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestSweepWorkDirs(t *testing.T) {
	tmp := t.TempDir()
	me := self()
	mk := func(name, owner string) {
		t.Helper()
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kubeconfig"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, workDirOwnerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("kindtest-kt-alive-1", fmt.Sprintf("%d %s\n", me.PID, me.Start))
	// This process's PID with another start time: a recycled PID, so the
	// owner that wrote it is gone.
	mk("kindtest-kt-gone-2", fmt.Sprintf("%d not-%s\n", me.PID, me.Start))
	mk("kindtest-kt-kept-3", "")
	mk("kindtest-kt-garbled-4", "pid?")
	mk("other-kt-gone-5", fmt.Sprintf("%d not-%s\n", me.PID, me.Start))
	n, err := sweepWorkDirs(tmp)
	if err != nil || n != 1 {
		t.Fatalf("sweepWorkDirs = %d, %v; want 1, nil", n, err)
	}
	want := []string{"kindtest-kt-alive-1", "kindtest-kt-garbled-4", "kindtest-kt-kept-3", "other-kt-gone-5"}
	if got := workDirs(t, tmp); !slices.Equal(got, want) {
		t.Errorf("left %q; want %q", got, want)
	}
}

func TestRemoveWorkDirs(t *testing.T) {
	tmp := t.TempDir()
	for _, name := range []string{"kindtest-kt-a-1", "kindtest-kt-a-22", "kindtest-kt-ab-3", "kindtest-kt-a-x-4", "kindtest-kt-b-5"} {
		if err := os.Mkdir(filepath.Join(tmp, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeWorkDirs(tmp, "kt-a"); err != nil {
		t.Fatal(err)
	}
	want := []string{"kindtest-kt-a-x-4", "kindtest-kt-ab-3", "kindtest-kt-b-5"}
	if got := workDirs(t, tmp); !slices.Equal(got, want) {
		t.Errorf("left %q; want %q", got, want)
	}
}

func TestNewWorkDir(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir, err := newWorkDir("kt-new")
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := workDirCluster(filepath.Base(dir)); !ok || name != "kt-new" {
		t.Errorf("%s: cluster %q, %v", dir, name, ok)
	}
	fi, err := os.Stat(dir)
	// Windows has no such mode bits: its temporary directory is the user's.
	if err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700) {
		t.Fatalf("%s: %v, %v; want a directory only its user reads", dir, fi, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, workDirOwnerFile))
	if err != nil {
		t.Fatal(err)
	}
	pid, start, ok := parseWorkDirOwner(string(raw))
	if me := self(); !ok || pid != me.PID || start != me.Start {
		t.Errorf("owner file %q; want this process, %+v", raw, me)
	}
	// Its owner runs: the sweep leaves it.
	if n, err := sweepWorkDirs(os.TempDir()); err != nil || n != 0 {
		t.Errorf("sweepWorkDirs = %d, %v; want 0", n, err)
	}
}
