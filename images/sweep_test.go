package images

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/lifetime"
)

// TestSweepBuilds checks that a build removes what a killed build left
// (an owner that is gone, or none named) and its own leftovers, and
// leaves alone what a build running beside it uses.
func TestSweepBuilds(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A process that has exited: its PID names an owner that is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	id := func() string {
		b := make([]byte, 6)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	own := id()
	b := &builder{cli: cli, res: Result{ContentHash: own + own + own + own + own + own[:4]}}
	live := b.buildLabels()
	live[lifetime.LabelBuild] = id()
	volumes := map[string]map[string]string{
		"dead owner": {lifetime.LabelBuild: id(), lifetime.LabelOwnerHost: host, lifetime.LabelOwnerPID: strconv.Itoa(dead.Process.Pid)},
		"no owner":   {lifetime.LabelBuild: id()},
		"own":        maps.Clone(b.buildLabels()),
		"live owner": live,
	}
	for what, labels := range volumes {
		name := "kindtest-test-sweep-" + labels[lifetime.LabelBuild]
		if err := cli.CreateVolume(ctx, name, labels); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.RemoveVolume(context.Background(), name) })
		volumes[what]["name"] = name
	}
	if err := b.sweepBuilds(ctx); err != nil {
		t.Fatal(err)
	}
	for what, labels := range volumes {
		left, err := cli.ListVolumes(ctx, map[string]string{lifetime.LabelBuild: labels[lifetime.LabelBuild]})
		if err != nil {
			t.Fatal(err)
		}
		if want := what == "live owner"; (len(left) > 0) != want {
			t.Errorf("%s: volume %s there after the sweep: %v, want %v", what, labels["name"], len(left) > 0, want)
		}
	}
}
