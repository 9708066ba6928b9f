package kindtest

import (
	"strings"
	"testing"
	"time"
)

func TestValidateControlPlanes(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		if got := optionErr(t, WithControlPlanes(n)); got != "" {
			t.Errorf("WithControlPlanes(%d): %s", n, got)
		}
	}
	wantErr(t, optionErr(t, WithControlPlanes(0)), "control planes: 0", "at least one", "use 1, 3 or 5")
	wantErr(t, optionErr(t, WithControlPlanes(-2)), "control planes: -2", "at least one")
	wantErr(t, optionErr(t, WithControlPlanes(2)), "control planes: 2", "etcd needs a majority (2 of 2)", "survive no more failures than 1", "use 1, 3 or 5")
	wantErr(t, optionErr(t, WithControlPlanes(4)), "control planes: 4", "(3 of 4)")
	wantErr(t, optionErr(t, WithControlPlanes(7)), "control planes: 7", "at most 5")
	wantErr(t, optionErr(t, WithControlPlanes(3), WithoutKubernetes()), "control planes: 3 with WithoutKubernetes")
	// Reported with the other option errors.
	got := optionErr(t, WithControlPlanes(2), WithWorkers(-1))
	wantErr(t, got, "control planes: 2", "workers: -1")
	// Node indexes: 0 the first control plane, then the workers, then
	// the other control planes.
	if got := optionErr(t, WithControlPlanes(3), WithWorkers(1), WithNodeLabels(3, map[string]string{"a": "b"})); got != "" {
		t.Errorf("labels on node 3 of 3 control planes and 1 worker: %s", got)
	}
	wantErr(t, optionErr(t, WithControlPlanes(3), WithWorkers(1), WithNodeLabels(4, map[string]string{"a": "b"})),
		"labels on node 4: no such node", "node 0 is the first control plane, 1 to 1 the workers (WithWorkers(1)), 2 to 3 the other control planes (WithControlPlanes(3))")
	wantErr(t, optionErr(t, WithNodeLabels(1, map[string]string{"a": "b"})), "node 0 is the control plane, 1 to 0 the workers")
}

func TestUnitControlPlaneNodes(t *testing.T) {
	cfg, err := newConfig([]Option{WithControlPlanes(3), WithWorkers(2)})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: cfg, identity: identity{name: "c"}}
	c.newNodes()
	var got []string
	for _, n := range c.nodes {
		got = append(got, n.name+"/"+n.role)
	}
	want := "c-control-plane/control-plane c-worker/worker c-worker2/worker c-control-plane2/control-plane c-control-plane3/control-plane"
	if strings.Join(got, " ") != want {
		t.Errorf("nodes: %s\nwant %s", strings.Join(got, " "), want)
	}
	if cps := c.ControlPlanes(); len(cps) != 3 || cps[0] != c.ControlPlane() || cps[1].index != 3 {
		t.Errorf("ControlPlanes: %v", cps)
	}
	if ws := c.Workers(); len(ws) != 2 || ws[0].index != 1 || ws[1].index != 2 {
		t.Errorf("Workers: %v", ws)
	}
	// One control plane: as before.
	cfg1, _ := newConfig(nil)
	c1 := &Cluster{cfg: cfg1, identity: identity{name: "c"}}
	c1.newNodes()
	if len(c1.nodes) != 1 || c1.nodes[0].name != "c-control-plane" || len(c1.Workers()) != 0 {
		t.Errorf("default nodes: %v", c1.nodes)
	}
}

func TestUnitControlPlanesKubeadmConfig(t *testing.T) {
	cp := &Node{name: "c-control-plane", ip: "172.18.0.2", role: RoleControlPlane}
	const token = "abcdef.0123456789abcdef"
	single := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, token: token, timeout: time.Minute, settings: &settings{}})
	for _, want := range []string{"controlPlaneEndpoint: 172.18.0.2:6443", "name: leader-elect\n    value: \"false\"", "name: election-timeout\n      value: \"100\""} {
		if !strings.Contains(single, want) {
			t.Errorf("one control plane: init config lacks %q:\n%s", want, single)
		}
	}
	ha := kubeadmInitConfig(initParams{cluster: "c", version: KubernetesVersion, cp: cp, endpoint: "172.18.0.9", token: token, timeout: time.Minute, settings: &settings{}, extraSANs: []string{"c-lb", "172.18.0.9"}})
	for _, want := range []string{"controlPlaneEndpoint: 172.18.0.9:6443", "advertiseAddress: 172.18.0.2", "  - c-lb\n  - 172.18.0.9\n", "  - 127.0.0.1\n"} {
		if !strings.Contains(ha, want) {
			t.Errorf("three control planes: init config lacks %q:\n%s", want, ha)
		}
	}
	if strings.Contains(ha, "leader-elect") {
		t.Errorf("three control planes: leader election must stay on:\n%s", ha)
	}
	if strings.Contains(ha, "election-timeout") || strings.Contains(ha, "heartbeat-interval") {
		t.Errorf("three control planes: etcd's members keep their default raft timing:\n%s", ha)
	}
	cp2 := &Node{name: "c-control-plane2", ip: "172.18.0.4", role: RoleControlPlane, index: 2}
	join := kubeadmJoinConfig(cp2, KubernetesVersion, token, time.Minute, &settings{})
	if strings.Contains(join, "kubelet-wait-bootstrap") {
		t.Errorf("a joining control plane must wait for its kubelet (its static pods need it):\n%s", join)
	}
	for _, want := range []string{"kubeConfigPath: " + discoveryKubeconfigPath, "controlPlane:\n  localAPIEndpoint:\n    advertiseAddress: 172.18.0.4\n    bindPort: 6443\n", "name: c-control-plane2"} {
		if !strings.Contains(join, want) {
			t.Errorf("control-plane join config lacks %q:\n%s", want, join)
		}
	}
	if strings.Contains(join, "taints: []") {
		t.Errorf("a control plane with workers keeps kubeadm's taint:\n%s", join)
	}
	w := &Node{name: "c-worker", ip: "172.18.0.3", role: RoleWorker, index: 1}
	if wj := kubeadmJoinConfig(w, KubernetesVersion, token, time.Minute, &settings{}); strings.Contains(wj, "controlPlane:") || !strings.Contains(wj, "- kubelet-wait-bootstrap\n") {
		t.Errorf("worker join config:\n%s", wj)
	}
	// Without workers every control plane runs workloads.
	cfg, _ := newConfig([]Option{WithControlPlanes(3)})
	cp2.cluster = &Cluster{cfg: cfg}
	if j := kubeadmJoinConfig(cp2, KubernetesVersion, token, time.Minute, &settings{}); !strings.Contains(j, "taints: []") {
		t.Errorf("control plane of a cluster without workers must be untainted:\n%s", j)
	}
}

func TestUnitReuseHashControlPlanes(t *testing.T) {
	one, _ := newConfig(nil)
	three, _ := newConfig([]Option{WithControlPlanes(3)})
	if reuseHash(one, "img") == reuseHash(three, "img") {
		t.Error("reuse hash must differ with the number of control planes")
	}
}
