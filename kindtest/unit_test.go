package kindtest

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestClusterNames(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	seen := map[string]bool{}
	for range 1000 {
		n := newClusterName("kt")
		if !strings.HasPrefix(n, "kt-") || len(n) != len("kt-")+8 || !valid.MatchString(n) {
			t.Fatalf("name %q", n)
		}
		if seen[n] {
			t.Fatalf("name %q made twice", n)
		}
		seen[n] = true
	}
	long := newClusterName(strings.Repeat("a", maxPrefixLen))
	for i := range maxWorkers + 1 {
		if n := nodeName(long, i); len(n) > 63 || !valid.MatchString(n) {
			t.Errorf("node name %q is not a valid DNS label", n)
		}
	}
	if got := []string{nodeName("c", 0), nodeName("c", 1), nodeName("c", 2)}; strings.Join(got, " ") != "c-control-plane c-worker c-worker2" {
		t.Errorf("node names %v", got)
	}
}

func TestLabels(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	l := nodeLabels(clusterLabels("kt-1", now, KeepOnFailure.String()), RoleWorker, 2)
	want := map[string]string{
		LabelCluster: "kt-1", LabelSession: Session(), LabelRole: RoleWorker, LabelNodeIndex: "2",
		LabelOwnerPID: strconv.Itoa(os.Getpid()), LabelCreated: "2026-11-29T12:00:00Z", LabelKeep: "on-failure",
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("label %s=%q, want %q", k, l[k], v)
		}
	}
	o := ownerFromLabels(l)
	if o != self() || !ownerAlive(o) {
		t.Errorf("owner %+v from labels, want this process %+v, alive", o, self())
	}
}

func TestParseKeep(t *testing.T) {
	for in, want := range map[string]KeepPolicy{"never": KeepNever, "on-failure": KeepOnFailure, "always": KeepAlways, "1": KeepAlways} {
		if got, err := parseKeep(in); err != nil || got != want {
			t.Errorf("parseKeep(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := parseKeep("maybe"); err == nil {
		t.Error("parseKeep(maybe): no error")
	}
}

func TestExitErrorMessage(t *testing.T) {
	e := &ExitError{Node: "n1", Cmd: []string{"sh", "-c", "echo 'a b'; exit 3"}, ExitCode: 3, Stdout: "out\n", Stderr: tail(strings.Repeat("e", 10000), maxErrorOutput)}
	msg := e.Error()
	for _, s := range []string{"node n1", `sh -c 'echo '\''a b'\''; exit 3'`, "exit code 3", "stdout:\nout", "[...]"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q:\n%.300s", s, msg)
		}
	}
	if len(e.Stderr) > maxErrorOutput+10 {
		t.Errorf("stderr kept whole: %d bytes", len(e.Stderr))
	}
}

func TestNodeErrorMessage(t *testing.T) {
	e := &NodeError{Node: "n1", Step: "wait for systemd", Err: os.ErrDeadlineExceeded, Diagnostics: "failed units on n1:\n    x.service"}
	if msg := e.Error(); !strings.HasPrefix(msg, "node n1: wait for systemd: ") || !strings.Contains(msg, "x.service") {
		t.Errorf("message %q", msg)
	}
	if !strings.Contains(e.Unwrap().Error(), "timeout") {
		t.Errorf("Unwrap lost the cause")
	}
}

func TestBootstrapToken(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	if a, b := newBootstrapToken(), newBootstrapToken(); !re.MatchString(a) || a == b {
		t.Errorf("tokens %q %q", a, b)
	}
}

func TestKubeconfigRewrite(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("x"))
	kc := []byte("apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: " + b64 +
		"\n    server: https://10.0.0.2:6443\n  name: c\nusers:\n- name: u\n  user:\n    client-certificate-data: " + b64 +
		"\n    client-key-data: " + b64 + "\n")
	out, err := rewriteServer(kc, "https://127.0.0.1:40000")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "server: https://127.0.0.1:40000\n") || strings.Contains(string(out), "10.0.0.2") {
		t.Errorf("rewritten:\n%s", out)
	}
	if _, err := rewriteServer([]byte("apiVersion: v1\n"), "x"); err == nil {
		t.Error("a kubeconfig without a server: no error")
	}
	if _, err := newAPIClient(kc); err == nil {
		t.Error("garbage credentials accepted")
	}
	if ca, err := kubeconfigCA(kc); err != nil || string(ca) != "x" {
		t.Errorf("kubeconfigCA: %q, %v; want the decoded certificate-authority-data", ca, err)
	}
	if _, err := kubeconfigCA([]byte(strings.Replace(string(kc), b64, "%%", 1))); err == nil {
		t.Error("kubeconfigCA: no error for data that is not base64")
	}
}

func TestKubeadmConfig(t *testing.T) {
	cp := &Node{name: "c-control-plane", ip: "172.18.0.2"}
	single := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", singleNode: true, timeout: 25 * time.Minute, settings: &settings{}})
	for _, s := range []string{"kind: InitConfiguration", "advertiseAddress: 172.18.0.2", "taints: []", "kubernetesVersion: " + KubernetesVersion,
		"podSubnet: 10.244.0.0/16", "cgroupDriver: cgroupfs", "failCgroupV1: false", "imagePullPolicy: Never", "- 127.0.0.1", "kubernetesAPICall: 25m0s", "controlPlaneComponentHealthCheck: 25m0s"} {
		if !strings.Contains(single, s) {
			t.Errorf("init config lacks %q", s)
		}
	}
	if multi := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", timeout: time.Minute, settings: &settings{}}); strings.Contains(multi, "taints") {
		t.Error("a multi-node control plane must keep its taint")
	}
	if remote := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: "abcdef.0123456789abcdef", singleNode: true, timeout: time.Minute, settings: &settings{}, extraSANs: []string{"10.251.0.2"}}); !strings.Contains(remote, "  - c-control-plane\n  - 10.251.0.2\n") {
		t.Errorf("a remote engine's address is not among the certificate's names:\n%s", remote)
	}
	join := kubeadmJoinConfig(&Node{name: "c-worker", ip: "172.18.0.3", index: 1}, KubernetesVersion, "abcdef.0123456789abcdef", 7*time.Minute, &settings{})
	for _, s := range []string{"kind: JoinConfiguration", "tlsBootstrapToken: \"abcdef.0123456789abcdef\"", "name: c-worker", `value: "172.18.0.3"`, "discovery: 7m0s", "tlsBootstrap: 7m0s"} {
		if !strings.Contains(join, s) {
			t.Errorf("join config lacks %q", s)
		}
	}
	// The cgroup v1 exception goes to v1 hosts only.
	v2 := &Node{name: "c-control-plane", ip: "172.18.0.2", cgroupV2: true}
	if cfg := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: v2, token: "abcdef.0123456789abcdef", singleNode: true, timeout: time.Minute, settings: &settings{}}); strings.Contains(cfg, "failCgroupV1") || !strings.Contains(cfg, "cgroupDriver: systemd") {
		t.Errorf("cgroup v2 init config: want the systemd driver and no failCgroupV1:\n%s", cfg)
	}
	if cfg := kubeadmJoinConfig(&Node{name: "c-worker", ip: "172.18.0.3", index: 1, cgroupV2: true}, KubernetesVersion, "abcdef.0123456789abcdef", time.Minute, &settings{}); strings.Contains(cfg, "failCgroupV1") {
		t.Errorf("cgroup v2 join config has failCgroupV1:\n%s", cfg)
	}
	if !strings.Contains(join, "failCgroupV1: false") {
		t.Error("cgroup v1 join config lacks failCgroupV1: false")
	}
}

func TestEmptyClusterNamesRefused(t *testing.T) {
	// Refused before any engine is asked: with an empty name, a label
	// filter would select every kindtest cluster on the engine.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, name := range []string{"", "  ", "Not_A_Name"} {
		if _, err := Attach(context.Background(), name); err == nil || errors.Is(err, ErrDockerUnavailable) {
			t.Errorf("Attach(%q): %v, want a name error", name, err)
		}
		if err := DeleteCluster(context.Background(), name); err == nil || errors.Is(err, ErrDockerUnavailable) {
			t.Errorf("DeleteCluster(%q): %v, want a name error", name, err)
		}
	}
}

func TestPanickingSeen(t *testing.T) {
	if panicking() {
		t.Fatal("panicking() without a panic")
	}
	seen := false
	func() {
		defer func() {
			seen = panicking()
			_ = recover()
		}()
		panic("test")
	}()
	if !seen {
		t.Error("panicking() missed a panic in progress")
	}
}

func TestKnownCausesNameInotify(t *testing.T) {
	if h := knownCauses("last console lines:\n    Failed to allocate manager object: Too many open files"); !strings.Contains(h, "fs.inotify.max_user_instances") {
		t.Errorf("no inotify hint: %q", h)
	}
	if h := knownCauses("kubelet: connection refused"); h != "" {
		t.Errorf("hint for an unrelated failure: %q", h)
	}
}

func TestCreationTime(t *testing.T) {
	if got, err := creationTime(90*time.Second, 90*time.Second); err != nil || got != 60*time.Second {
		t.Errorf("90 s left: %v, %v; want 1m0s for creation", got, err)
	}
	_, err := creationTime(24900*time.Millisecond, 25*time.Second)
	if err == nil {
		t.Fatal("25 s -timeout: no error")
	}
	for _, w := range []string{"go test -timeout 25s", "24.9s away", "keeps the last 30s", "raise -timeout to 30s plus"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if _, err := creationTime(30*time.Second, 0); err == nil || strings.Contains(err.Error(), "go test -timeout") {
		t.Errorf("exactly the margin left, -timeout unknown: %v; want an error that names no -timeout", err)
	}
}
