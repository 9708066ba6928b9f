package kindtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestNodeLifecycle(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			dc := engine(t)
			c := start(t, dc, kindtest.WithWorkers(workers), kindtest.WithoutKubernetes())
			ctx := context.Background()
			nodes := c.Nodes()
			if len(nodes) != workers+1 {
				t.Fatalf("got %d nodes, want %d", len(nodes), workers+1)
			}
			if c.ControlPlane().Role() != kindtest.RoleControlPlane {
				t.Errorf("first node's role is %q", c.ControlPlane().Role())
			}
			for i, n := range nodes {
				state, err := n.Exec(ctx, "systemctl", "is-system-running")
				if got := strings.TrimSpace(state.Stdout); got != "running" {
					t.Errorf("%s: systemd is %q (%v), want running", n.Name(), got, err)
				}
				mounts, err := n.Exec(ctx, "findmnt", "-n", "-o", "OPTIONS", "/sys")
				if err != nil || !strings.HasPrefix(mounts.Stdout, "ro,") {
					t.Errorf("%s: /sys mounted %q (%v), want read-only", n.Name(), mounts.Stdout, err)
				}
				host, err := n.Exec(ctx, "hostname")
				if err != nil || strings.TrimSpace(host.Stdout) != n.Name() {
					t.Errorf("%s: hostname %q (%v)", n.Name(), host.Stdout, err)
				}
				info, err := dc.InspectContainer(ctx, n.ID())
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{
					kindtest.LabelCluster:   c.Name(),
					kindtest.LabelSession:   kindtest.Session(),
					kindtest.LabelRole:      n.Role(),
					kindtest.LabelNodeIndex: fmt.Sprint(i),
				}
				for k, v := range want {
					if info.Labels[k] != v {
						t.Errorf("%s: label %s=%q, want %q", n.Name(), k, info.Labels[k], v)
					}
				}
				for _, k := range []string{kindtest.LabelOwnerHost, kindtest.LabelOwnerPID, kindtest.LabelCreated} {
					if info.Labels[k] == "" {
						t.Errorf("%s: label %s missing", n.Name(), k)
					}
				}
			}
			// Machine ids differ between nodes.
			seen := map[string]string{}
			for _, n := range nodes {
				id, err := n.Exec(ctx, "cat", "/etc/machine-id")
				if err != nil {
					t.Fatal(err)
				}
				if other, dup := seen[id.Stdout]; dup {
					t.Errorf("%s and %s share machine id %s", n.Name(), other, id.Stdout)
				}
				seen[id.Stdout] = n.Name()
			}
			// The cluster's network and volumes carry its labels too.
			sel := map[string]string{kindtest.LabelCluster: c.Name()}
			if nets, err := dc.ListNetworks(ctx, sel); err != nil || len(nets) != 1 {
				t.Errorf("%d labelled networks (%v), want 1", len(nets), err)
			}
			if vols, err := dc.ListVolumes(ctx, sel); err != nil || len(vols) != workers+1 {
				t.Errorf("%d labelled volumes (%v), want %d", len(vols), err, workers+1)
			}
		})
	}
}

func TestExec(t *testing.T) {
	dc := engine(t)
	c := start(t, dc, kindtest.WithoutKubernetes())
	ctx := context.Background()
	n := c.ControlPlane()

	res, err := n.Exec(ctx, "sh", "-c", "echo out; echo err >&2; exit 3")
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 {
		t.Errorf("got %+v, want stdout out, stderr err, exit code 3", res)
	}
	var ee *kindtest.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v is not an *ExitError", err)
	}
	if ee.Node != n.Name() || ee.ExitCode != 3 || ee.Stderr != "err\n" || ee.Cmd[0] != "sh" {
		t.Errorf("ExitError %+v", ee)
	}
	if msg := err.Error(); !strings.Contains(msg, n.Name()) || !strings.Contains(msg, "exit code 3") || !strings.Contains(msg, "err") {
		t.Errorf("error message %q lacks node, exit code or stderr", msg)
	}

	res, err = n.Exec(ctx, "true")
	if err != nil || res.ExitCode != 0 {
		t.Errorf("true: %+v, %v", res, err)
	}

	in := strings.Repeat("kindtest stdin line\n", 10000)
	res, err = n.ExecInput(ctx, strings.NewReader(in), "sh", "-c", "wc -c; sha256sum")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Stdout, fmt.Sprint(len(in))+"\n") {
		t.Errorf("stdin: command saw %q, want %d bytes", res.Stdout, len(in))
	}

	// Output beyond the cap is cut in the error but whole in the result.
	res, err = n.Exec(ctx, "sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x >&2; exit 1")
	if len(res.Stderr) != 100000 {
		t.Errorf("result stderr %d bytes, want 100000", len(res.Stderr))
	}
	if errors.As(err, &ee) && len(ee.Stderr) > 5000 {
		t.Errorf("ExitError keeps %d bytes of stderr, want it capped", len(ee.Stderr))
	}

	if _, err := n.Exec(ctx); err == nil {
		t.Error("empty command: no error")
	}
	if c.Node(n.Name()) != n || c.Node("nope") != nil {
		t.Error("Node by name")
	}
}
