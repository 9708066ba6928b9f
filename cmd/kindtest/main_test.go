package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/kindtest"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"delete"}, {"logs"}, {"list", "-bogus"},
		{"build", "-platform", "linux/s390x"}, {"build", "-platform", "linux/amd64,arm64"},
		{"image", "save", "-o", "x.tar", "-platform", "windows/amd64"}, {"image", "save", "-o", "x.tar", "-platform", "linux/amd64/v8"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, &out)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("kindtest %v: got %v, want a usage error", args, err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "prune") {
		t.Errorf("help: %v\n%s", err, out.String())
	}
}

func TestSubcommandHelp(t *testing.T) {
	for _, args := range [][]string{{"bench", "-h"}, {"logs", "NAME", "--help"}, {"prune", "-help"}} {
		err := run(context.Background(), args, io.Discard)
		var help helpRequested
		if !errors.As(err, &help) {
			t.Errorf("kindtest %v: got %v, want its flags", args, err)
			continue
		}
		if !strings.HasPrefix(help.text, "usage: kindtest "+args[0]+" [flags]") || !strings.Contains(help.text, "\n  -") {
			t.Errorf("kindtest %v: help is %q, want the usage line and the flags", args, help.text)
		}
	}
}

func TestParseFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		dir      string
		all      bool
		rest     []string
		usageErr bool
	}{
		{args: []string{"a", "-dir", "d", "b"}, dir: "d", rest: []string{"a", "b"}},
		{args: []string{"-dir=d", "a", "-all"}, dir: "d", all: true, rest: []string{"a"}},
		{args: []string{"a", "--", "-dir", "b"}, dir: ".", rest: []string{"a", "-dir", "b"}},
		{args: []string{"-all"}, dir: ".", all: true},
		{args: []string{"a", "-bogus"}, usageErr: true},
		{args: []string{"a", "-dir"}, usageErr: true},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		dir := fs.String("dir", ".", "")
		all := fs.Bool("all", false, "")
		rest, err := parse(fs, tc.args)
		var ue usageError
		if tc.usageErr {
			if !errors.As(err, &ue) {
				t.Errorf("parse %q: got %v, want a usage error", tc.args, err)
			}
			continue
		}
		if err != nil || *dir != tc.dir || *all != tc.all || !slices.Equal(rest, tc.rest) {
			t.Errorf("parse %q: dir %q all %t rest %q err %v; want dir %q all %t rest %q", tc.args, *dir, *all, rest, err, tc.dir, tc.all, tc.rest)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"list", "extra"}, &out); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("list extra: %v", err)
	}
}

func TestErrorLineHasOnePrefix(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"kindtest: invalid options: x", "kindtest: invalid options: x"},
		{"delete: no such cluster", "kindtest: delete: no such cluster"},
	} {
		if got := errorLine(errors.New(tc.err)); got != tc.want {
			t.Errorf("errorLine(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestCommands(t *testing.T) {
	ctx := context.Background()
	dc := enginetest.Client(t)
	c, err := kindtest.New(ctx, kindtest.WithoutKubernetes(), kindtest.WithNamePrefix("cmdtest"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete(ctx)

	var out bytes.Buffer
	if err := run(ctx, []string{"list"}, &out); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, c.Name()+" ") {
			line = l
		}
	}
	host, _ := os.Hostname()
	if f := strings.Fields(line); len(f) < 5 || f[1] != "1" || !strings.HasPrefix(f[3], host+"/") || f[4] != "true" {
		t.Errorf("list line for %s: %q\n%s", c.Name(), line, out.String())
	}

	dir := t.TempDir()
	out.Reset()
	// As the README writes it: the flag after the name.
	if err := run(ctx, []string{"logs", c.Name(), "-dir", dir}, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, c.Name(), c.ControlPlane().Name(), "journal.log")); err != nil {
		t.Errorf("logs: %v", err)
	}

	out.Reset()
	if err := run(ctx, []string{"delete", c.Name()}, &out); err != nil {
		t.Fatal(err)
	}
	cs, err := dc.ListContainers(ctx, map[string]string{kindtest.LabelCluster: c.Name()})
	if err != nil || len(cs) != 0 {
		t.Errorf("after delete: %d containers (%v)", len(cs), err)
	}
	if err := run(ctx, []string{"delete", c.Name()}, &out); err == nil || !strings.Contains(err.Error(), "no such cluster") {
		t.Errorf("deleting it again: %v", err)
	}

	out.Reset()
	// Orphans of other runs that the engine cannot remove are not this
	// test's concern; the command must still report what it did.
	perr := run(ctx, []string{"prune"}, &out)
	if perr != nil {
		t.Logf("prune: %v", perr)
		if strings.Contains(perr.Error(), c.Name()) {
			t.Fatal(perr)
		}
	}
	if out.Len() == 0 && perr == nil {
		t.Error("prune printed nothing")
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 20; i++ {
		d = append(d, time.Duration(i)*time.Second)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 10 * time.Second}, {0.95, 19 * time.Second}, {0.99, 20 * time.Second}, {0, time.Second}} {
		if got := percentile(d, tc.q); got != tc.want {
			t.Errorf("percentile(1..20 s, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{3}, 0.99); got != 3 {
		t.Errorf("percentile of one value: %v", got)
	}
}

// TestPoolCommand runs a command under `kindtest pool`: it sees the
// pool in its environment, its exit code is the pool's, and the pool's
// clusters (ready, or cut short mid-creation) are gone afterwards.
func TestPoolCommand(t *testing.T) {
	ctx := context.Background()
	dc := enginetest.Client(t)
	for _, script := range []string{
		`echo "pool=$KINDTEST_POOL"; exit 3`,          // the pool is still making its cluster
		`sleep 8; echo "pool=$KINDTEST_POOL"; exit 3`, // its cluster is ready
	} {
		var out bytes.Buffer
		err := run(ctx, []string{"pool", "-n", "1", "-without-kubernetes", "-prefix", "cmdpool", "--", "sh", "-c", script}, &out)
		var code exitCode
		if !errors.As(err, &code) || code != 3 {
			t.Errorf("pool -- sh -c %q: %v, want the command's exit status 3", script, err)
		}
		_, id, ok := strings.Cut(strings.TrimSpace(out.String()), "pool=")
		if !ok || len(id) != 12 {
			t.Fatalf("the command did not see KINDTEST_POOL: %q", out.String())
		}
		for _, list := range []func() (int, error){
			func() (int, error) {
				cs, err := dc.ListContainers(ctx, map[string]string{kindtest.LabelPool: id})
				return len(cs), err
			},
			func() (int, error) {
				vs, err := dc.ListVolumes(ctx, map[string]string{kindtest.LabelPool: id})
				return len(vs), err
			},
			func() (int, error) {
				ns, err := dc.ListNetworks(ctx, map[string]string{kindtest.LabelPool: id})
				return len(ns), err
			},
		} {
			if n, err := list(); err != nil || n != 0 {
				t.Errorf("pool %s: %d object(s) left after it ended (%v)", id, n, err)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pool", "-n", "0", "--", "true"}, "size 0: want 1 to 8"},
		{[]string{"pool", "-workers", "-1", "--", "true"}, "invalid options"},
		{[]string{"pool", "--", "/nonexistent/command"}, `command "/nonexistent/command"`},
		{[]string{"pool", "-n", "1"}, "no command"},
	} {
		err := run(ctx, tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kindtest %v: %v, want an error that says %q", tc.args, err, tc.want)
		}
	}
}

func TestParsePlatforms(t *testing.T) {
	for list, want := range map[string]string{
		"":                           "",
		"linux/arm64":                "linux/arm64",
		"linux/amd64,linux/arm64":    "linux/amd64 linux/arm64",
		"linux/arm64, linux/arm64":   "linux/arm64",
		"linux/arm64/v8,linux/arm64": "linux/arm64",
	} {
		got, err := parsePlatforms(list)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("parsePlatforms(%q) = %q, %v; want %q", list, got, err, want)
		}
	}
	if _, err := parsePlatforms("linux/arm64,"); err == nil || !strings.Contains(err.Error(), "linux/amd64 and linux/arm64") {
		t.Errorf("a trailing comma: %v", err)
	}
}
