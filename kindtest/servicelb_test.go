package kindtest

import (
	"context"
	"strings"
	"testing"
)

func TestUnitServiceLoadBalancerForwards(t *testing.T) {
	var svc lbService
	svc.Metadata.Namespace, svc.Metadata.Name = "ns", "web"
	for _, p := range []struct {
		port, nodePort int
		protocol       string
	}{{443, 31443, "TCP"}, {53, 31053, "UDP"}, {80, 30080, ""}, {8080, 0, "TCP"}} {
		svc.Spec.Ports = append(svc.Spec.Ports, struct {
			Port     int    `json:"port"`
			NodePort int    `json:"nodePort"`
			Protocol string `json:"protocol"`
		}{p.port, p.nodePort, p.protocol})
	}
	// UDP and ports without a node port are left out; the label is sorted.
	if got := svc.forwards(); got != "443:31443,80:30080" {
		t.Errorf("forwards %q", got)
	}
	if svc.key() != "ns/web" {
		t.Errorf("key %q", svc.key())
	}
}

func TestUnitLoadBalancerAddrWithoutLoadBalancer(t *testing.T) {
	cfg, err := newConfig([]Option{WithoutLoadBalancer()})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: cfg, identity: identity{name: "kt-x"}}
	_, err = c.LoadBalancerAddr(context.Background(), "default", "web", 80)
	if err == nil || !strings.Contains(err.Error(), "made WithoutLoadBalancer") {
		t.Errorf("LoadBalancerAddr on a cluster WithoutLoadBalancer: %v", err)
	}
	if def, _ := newConfig(nil); !def.loadBalancers() {
		t.Error("LoadBalancer Services must get load balancers by default")
	}
	if off, _ := newConfig([]Option{WithoutKubernetes()}); off.loadBalancers() {
		t.Error("a cluster without Kubernetes has no Services to balance")
	}
}
