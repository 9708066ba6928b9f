package main

import (
	"strings"
	"testing"
	"time"
)

func TestPodName(t *testing.T) {
	for pod, want := range map[string]string{
		"etcd-kt-1-control-plane":                "etcd",
		"kube-proxy-x7k2p":                       "kube-proxy",
		"coredns-5d78c9869d-x7k2p":               "coredns",
		"coredns-bcdfghjkl-x7k2p":                "coredns",
		"kube-network-policies-abcde":            "kube-network-policies",
		"local-path-provisioner-7c4d9f5b8-qwzxp": "local-path-provisioner",
		"kube-apiserver-kt-1-control-plane":      "kube-apiserver",
		"busybox":                                "busybox",
	} {
		if got := podName(pod, "kt-1-control-plane"); got != want {
			t.Errorf("podName(%q) = %q, want %q", pod, got, want)
		}
	}
}

func TestParseNodeTimeline(t *testing.T) {
	start := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	out := `== units
containerd Tue 2026-12-01 11:00:01.500000 UTC
kubelet Tue 2026-12-01 11:00:01.750000 UTC
== containerd
time="2026-12-01T11:00:01.900000000Z" level=info msg="RunPodSandbox for name:\"etcd-n1\"  uid:\"c69f\"  namespace:\"kube-system\""
time="2026-12-01T11:00:02.000000000Z" level=info msg="RunPodSandbox for name:\"etcd-n1\"  uid:\"c69f\"  namespace:\"kube-system\" returns sandbox id \"s1\""
time="2026-12-01T11:00:02.050000000Z" level=info msg="CreateContainer within sandbox \"s1\" for container name:\"etcd\""
time="2026-12-01T11:00:02.100000000Z" level=info msg="CreateContainer within sandbox \"s1\" for name:\"etcd\" returns container id \"c1\""
time="2026-12-01T11:00:02.300000000Z" level=info msg="StartContainer for \"c1\" returns successfully"
== kubelet
I1201 11:00:03.000000     123 kubelet_node_status.go:78] "Successfully registered node" node="n1"
== log /var/log/pods/kube-system_kube-apiserver-n1_uid/kube-apiserver/0.log
2026-12-01T11:00:02.400000000Z stderr F I1201 flags
2026-12-01T11:00:02.900000000Z stderr F I1201 secure_serving.go:1] Serving securely on [::]:6443
== kubeadm
I1201 11:00:02.000000    99 initconfiguration.go:1] loading
[wait-control-plane] Waiting
I1201 11:00:04.000000    99 uploadconfig.go:1] upload
[upload-config] Storing
`
	tl := timeline{}
	parseNodeTimeline(strings.NewReader(out), "n1", start, tl)
	want := map[string]time.Duration{
		"unit containerd active":                        1500 * time.Millisecond,
		"unit kubelet active":                           1750 * time.Millisecond,
		"sandbox asked etcd":                            1900 * time.Millisecond,
		"sandbox ready etcd":                            2 * time.Second,
		"created etcd":                                  2100 * time.Millisecond,
		"started etcd":                                  2300 * time.Millisecond,
		"kubelet: node registered":                      3 * time.Second,
		"log kube-apiserver/kube-apiserver: first line": 2400 * time.Millisecond,
		"log kube-apiserver/kube-apiserver: Serving securely on": 2900 * time.Millisecond,
		"kubeadm [wait-control-plane]":                           2 * time.Second,
		"kubeadm [upload-config]":                                4 * time.Second,
		"kubeadm: last line":                                     4 * time.Second,
	}
	for name, d := range want {
		if tl[name] != d {
			t.Errorf("%s: %v, want %v", name, tl[name], d)
		}
	}
	if len(tl) != len(want) {
		t.Errorf("timeline has %d events, want %d: %v", len(tl), len(want), tl)
	}
}

func TestTimelineLoggerEvents(t *testing.T) {
	start := time.Now()
	l := &timelineLogger{start: start}
	l.lines = []timedLine{
		{start.Add(time.Second), "kindtest: kt-1: init done in 4.2s"},
		{start.Add(2 * time.Second), "kindtest: kt-1: nodes Ready after 1s"},
		{start.Add(3 * time.Second), "kindtest: creating cluster kt-1 (1 node(s), image x)"},
	}
	tl := timeline{}
	l.events(tl)
	if tl["host: init done"] != time.Second || tl["host: nodes Ready"] != 2*time.Second || len(tl) != 2 {
		t.Errorf("events: %v", tl)
	}
}
