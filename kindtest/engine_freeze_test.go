package kindtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// TestFrozenNodeRemoved: on a cgroup v1 host, a node with a process in a
// frozen freezer cgroup (as a pod's container is left when the node's runc
// is killed while it freezes the container's cgroup) ignores the kill, so
// the engine cannot remove the node until the cgroup is thawed. Delete
// thaws it and removes everything.
func TestFrozenNodeRemoved(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	info, err := dc.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.CgroupVersion == "2" {
		t.Skip("cgroup v2's freezer lets SIGKILL through: nothing to thaw on this engine")
	}
	ctx := context.Background()
	c, err := kindtest.New(ctx, kindtest.WithImage(img), kindtest.WithoutKubernetes(), kindtest.WithLogger(kindtest.LoggerFunc(t.Logf)))
	if err != nil {
		t.Fatal(err)
	}
	name := c.Name()
	t.Cleanup(func() { _ = kindtest.DeleteCluster(context.Background(), name) })
	n := c.ControlPlane()
	// Inside the node its own freezer cgroup is the hierarchy's root.
	const cg = "/sys/fs/cgroup/freezer/kt-frozen"
	freeze := `set -e
mkdir -p ` + cg + `
setsid sh -c 'echo $$ > ` + cg + `/cgroup.procs; exec sleep 3600' </dev/null >/dev/null 2>&1 &
while [ -z "$(cat ` + cg + `/cgroup.procs)" ]; do sleep 0.05; done
echo FROZEN > ` + cg + `/freezer.state
while [ "$(cat ` + cg + `/freezer.state)" != FROZEN ]; do sleep 0.05; done
cat ` + cg + `/cgroup.procs`
	res, err := n.Exec(ctx, "sh", "-c", freeze)
	if err != nil {
		t.Fatalf("freeze a process in the node: %v", err)
	}
	t.Logf("frozen in %s: pid %s", cg, strings.TrimSpace(res.Stdout))
	dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	if err := c.Delete(dctx); err != nil {
		t.Fatalf("delete a node with a frozen cgroup: %v", err)
	}
	t.Logf("deleted in %v", time.Since(start).Round(100*time.Millisecond))
	if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: name}); n != 0 {
		t.Errorf("%d object(s) left", n)
	}
}
