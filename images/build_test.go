package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/lifetime"
)

type testLogger struct{ t *testing.T }

func (l testLogger) Printf(format string, args ...any) {
	l.t.Helper()
	l.t.Logf(format, args...)
}

// TestNodeImage builds the node image (or finds it up to date), then checks
// the versions inside and that a booted node's containerd holds every
// image kubeadm needs.
func TestNodeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the node image: not in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	cli := enginetest.Client(t)

	res, err := Build(ctx, WithLogger(testLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node image %s (built: %t) in %s", res.ContentImage, res.Built, res.Duration)
	if res.Image != DefaultNodeImage || res.KubernetesVersion != DefaultKubernetesVersion {
		t.Errorf("result %+v: want image %s, version %s", res, DefaultNodeImage, DefaultKubernetesVersion)
	}
	img, err := cli.InspectImage(ctx, res.Image)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if engine, _ := info.Platform(); res.Platform != engine || img.Platform != engine {
		t.Errorf("built for %s, image for %s: want the engine's platform, %s", res.Platform, img.Platform, engine)
	}
	if img.Labels[lifetime.LabelImageContentHash] != res.ContentHash || img.Labels[lifetime.LabelImageKubernetesVersion] != res.KubernetesVersion {
		t.Errorf("image labels %v: want %s=%s and %s=%s", img.Labels,
			lifetime.LabelImageContentHash, res.ContentHash, lifetime.LabelImageKubernetesVersion, res.KubernetesVersion)
	}

	again, err := Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.ContentImage != res.ContentImage {
		t.Errorf("second build %+v: want the same image, up to date", again)
	}
	t.Logf("up-to-date check took %s", again.Duration)

	node := startNode(ctx, t, cli, res.Image)
	run := func(cmd ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code, err := cli.Exec(ctx, node, cmd, docker.ExecOptions{Stdout: &stdout, Stderr: &stderr})
		if err != nil || code != 0 {
			t.Fatalf("%v: exit %d, %v: %s%s", cmd, code, err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}

	if out := run("kubelet", "--version"); !strings.Contains(out, "Kubernetes "+res.KubernetesVersion) {
		t.Errorf("kubelet --version: %q", out)
	}
	if out := run("kubectl", "version", "--client"); !strings.Contains(out, "Client Version: "+res.KubernetesVersion) {
		t.Errorf("kubectl version --client: %q", out)
	}
	if out := run("containerd", "--version"); !strings.Contains(out, "v2.") {
		t.Errorf("containerd --version: %q", out)
	}
	waitLog(ctx, t, cli, node, "kindtest-entrypoint: waiting for SIGUSR1 to boot")

	// The provisioning the library does before boot, as far as systemd and
	// containerd need it.
	run("mount", "-o", "remount,ro", "/sys")
	run("mount", "--make-rshared", "/")
	if err := cli.KillContainer(ctx, node, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	waitLog(ctx, t, cli, node, "kindtest-entrypoint: booting systemd")
	state := poll(ctx, t, "systemd running", func() (string, bool) {
		var out bytes.Buffer
		_, err := cli.Exec(ctx, node, []string{"systemctl", "is-system-running"}, docker.ExecOptions{Stdout: &out})
		s := strings.TrimSpace(out.String())
		return s, err == nil && (s == "running" || s == "degraded")
	})
	if state != "running" {
		var out bytes.Buffer
		cli.Exec(ctx, node, []string{"systemctl", "--failed", "--no-legend"}, docker.ExecOptions{Stdout: &out})
		t.Errorf("systemd is %s; failed units:\n%s", state, out.String())
	}

	want := strings.Fields(run("kubeadm", "config", "images", "list", "--kubernetes-version", res.KubernetesVersion))
	want = append(want, LocalPathProvisionerImage, NetworkPoliciesImage)
	poll(ctx, t, "containerd lists every kubeadm image and the provisioner's", func() (string, bool) {
		var out bytes.Buffer
		_, err := cli.Exec(ctx, node, []string{"ctr", "--namespace", "k8s.io", "images", "list", "--quiet"}, docker.ExecOptions{Stdout: &out})
		if err != nil {
			return err.Error(), false
		}
		have := strings.Fields(out.String())
		for _, ref := range want {
			if !strings.Contains(" "+strings.Join(have, " ")+" ", " "+ref+" ") {
				return fmt.Sprintf("%s missing from %v", ref, have), false
			}
		}
		return "", true
	})
}

// startNode creates and starts a node container the way the library does,
// with a fresh volume at /var, and removes both when the test ends.
func startNode(ctx context.Context, t *testing.T, cli *docker.Client, image string) string {
	t.Helper()
	name := fmt.Sprintf("kindtest-images-test-%d", time.Now().UnixNano())
	labels := map[string]string{"dev.kindtest.test": "images"}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := errors.Join(cli.RemoveContainer(cctx, name), cli.RemoveVolume(cctx, name)); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := cli.CreateVolume(ctx, name, labels); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	id, err := cli.CreateContainer(ctx, docker.ContainerSpec{
		Name:       name,
		Hostname:   name,
		Image:      image,
		Labels:     labels,
		Tty:        true,
		Privileged: true,
		Tmpfs:      map[string]string{"/tmp": "", "/run": ""},
		Volumes:    map[string]string{name: "/var"},
		Binds:      []string{"/lib/modules:/lib/modules:ro"},
		StopSignal: "SIGRTMIN+3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Logf("node container created and started in %s", time.Since(start).Round(time.Millisecond))
	return id
}

func waitLog(ctx context.Context, t *testing.T, cli *docker.Client, id, line string) {
	t.Helper()
	poll(ctx, t, fmt.Sprintf("log line %q", line), func() (string, bool) {
		logs, err := cli.ContainerLogs(ctx, id, 50)
		if err != nil {
			return err.Error(), false
		}
		return logs, strings.Contains(logs, line)
	})
}

// poll calls check until it reports done, for at most a minute, and
// returns its last state.
func poll(ctx context.Context, t *testing.T, what string, check func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	delay := 50 * time.Millisecond
	for {
		state, done := check()
		if done {
			return state
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: last state: %s", what, state)
		}
		time.Sleep(delay)
		if delay < time.Second {
			delay *= 2
		}
	}
}
