package kindtest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

// outcomeTB is a test whose outcome the test decides: Start's cleanup is
// run on demand, with Failed reporting what the test chose. Everything
// else goes to the real test.
type outcomeTB struct {
	*testing.T
	failed   bool
	mu       sync.Mutex
	cleanups []func()
	logs     []string
}

func (o *outcomeTB) Cleanup(f func()) { o.cleanups = append(o.cleanups, f) }
func (o *outcomeTB) Failed() bool     { return o.failed }
func (o *outcomeTB) Logf(format string, args ...any) {
	o.mu.Lock()
	o.logs = append(o.logs, fmt.Sprintf(format, args...))
	o.mu.Unlock()
	o.T.Logf(format, args...)
}

// end runs the cleanups as the testing package would.
func (o *outcomeTB) end() {
	for i := len(o.cleanups) - 1; i >= 0; i-- {
		o.cleanups[i]()
	}
}

// checkKeptKubeconfig checks that the kept cluster c has a kubeconfig
// outside the test's temp dir, named by the log, that answers, and that
// deleting the cluster removes it.
func checkKeptKubeconfig(t *testing.T, o *outcomeTB, c *kindtest.Cluster) {
	t.Helper()
	var kc string
	o.mu.Lock()
	for _, l := range o.logs {
		if _, rest, ok := strings.Cut(l, "its kubeconfig: "); ok {
			kc = strings.Fields(rest)[0]
		}
	}
	o.mu.Unlock()
	dirs := workDirsOf(t, c.Name())
	t.Cleanup(func() {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	})
	if len(dirs) != 1 || kc != filepath.Join(dirs[0], "kubeconfig") {
		t.Fatalf("kept cluster: the log names kubeconfig %q; directories of the cluster in %s: %q", kc, os.TempDir(), dirs)
	}
	raw, err := os.ReadFile(kc)
	if err != nil || !bytes.Equal(raw, c.Kubeconfig()) {
		t.Errorf("kept cluster's kubeconfig %s: %v; not the cluster's", kc, err)
	}
	// The sweep leaves it: its creator has ended, and it is kept.
	pruneOrphans(t, c.Name())
	if _, err := os.Stat(kc); err != nil {
		t.Errorf("the sweep removed the kept cluster's kubeconfig: %v", err)
	}
	if err := kindtest.DeleteCluster(context.Background(), c.Name()); err != nil {
		t.Fatal(err)
	}
	if left := workDirsOf(t, c.Name()); len(left) != 0 {
		t.Errorf("deleting the kept cluster left its kubeconfig directories: %q", left)
	}
}

func (o *outcomeTB) logged(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func TestKeepAndLogExport(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	for _, tc := range []struct {
		keep   kindtest.KeepPolicy
		failed bool
		kept   bool
	}{
		{kindtest.KeepOnFailure, true, true},
		{kindtest.KeepOnFailure, false, false},
		{kindtest.KeepAlways, false, true},
		{kindtest.KeepNever, true, false},
	} {
		t.Run(fmt.Sprintf("%s/failed=%t", tc.keep, tc.failed), func(t *testing.T) {
			artifacts := t.TempDir()
			o := &outcomeTB{T: t, failed: tc.failed}
			c := kindtest.Start(o, kindtest.WithImage(img), kindtest.WithKeep(tc.keep), kindtest.WithArtifactsDir(artifacts))
			sel := map[string]string{kindtest.LabelCluster: c.Name()}
			t.Cleanup(func() { _ = dc.RemoveLabelled(context.Background(), sel) })
			o.end()

			left := leftovers(t, dc, sel)
			if tc.kept && left == 0 {
				t.Errorf("cluster removed despite keep policy %s", tc.keep)
			}
			if !tc.kept && left != 0 {
				t.Errorf("%d resources left with keep policy %s", left, tc.keep)
			}
			if tc.kept && !o.logged("kindtest delete "+c.Name()) {
				t.Errorf("kept cluster: the log does not say how to delete it")
			}
			if tc.kept && !o.logged("docker exec -it "+c.ControlPlane().Name()) {
				t.Errorf("kept cluster: the log does not say how to get in")
			}
			if tc.kept {
				checkKeptKubeconfig(t, o, c)
			}

			dir := filepath.Join(artifacts, c.Name())
			if !tc.failed {
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("logs exported for a test that passed")
				}
				return
			}
			node := c.ControlPlane().Name()
			for _, f := range []string{
				node + "/inspect.json", node + "/console.log", node + "/kubelet.log",
				node + "/containerd.log", node + "/kubeadm.log", node + "/journal.log",
				"nodes.txt", "pods.txt", "events.txt",
			} {
				st, err := os.Stat(filepath.Join(dir, f))
				if err != nil || st.Size() == 0 {
					t.Errorf("exported logs: %s missing or empty (%v)", f, err)
				}
			}
			// CoreDNS is part of ready; the control plane's own pods show up
			// once the kubelet has mirrored them, which may be later.
			pods, _ := os.ReadFile(filepath.Join(dir, "pods.txt"))
			if !strings.Contains(string(pods), "kube-system   coredns-") {
				t.Errorf("pods.txt does not list CoreDNS:\n%s", pods)
			}
		})
	}
}
