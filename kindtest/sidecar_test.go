package kindtest

import (
	"testing"

	"github.com/kindtest/kindtest/internal/docker"
)

// TestSidecars checks the sidecar descriptions: each complete, with a
// role and a container name of its own, told apart from the nodes, and
// wanted exactly by its option.
func TestSidecars(t *testing.T) {
	cfg, err := newConfig([]Option{WithRegistry(), WithControlPlanes(3)})
	if err != nil {
		t.Fatal(err)
	}
	def, _ := newConfig(nil)
	c := &Cluster{cfg: cfg, identity: identity{name: "kt-x"}, place: placement{kind: placementLocal, publishIP: "127.0.0.1"}}
	c.newNodes()
	roles, names := map[string]bool{}, map[string]bool{}
	for _, n := range c.nodes {
		names[n.name] = true
	}
	for _, s := range sidecars {
		if s.option == "" || s.what == "" || s.role == "" || s.image == "" || s.wanted == nil || s.name == nil || s.spec == nil || s.record == nil {
			t.Errorf("sidecar %q is incompletely described: %+v", s.what, s)
			continue
		}
		if roles[s.role] || s.role == RoleControlPlane || s.role == RoleWorker {
			t.Errorf("sidecar %s: role %q is not its own", s.what, s.role)
		}
		roles[s.role] = true
		if !isSidecar(s.role) || isSidecar(RoleWorker) || isSidecar(RoleControlPlane) {
			t.Errorf("isSidecar does not tell %s from the nodes", s.what)
		}
		if n := s.name(c.name); names[n] {
			t.Errorf("sidecar %s: name %s is taken", s.what, n)
		}
		names[s.name(c.name)] = true
		if !s.wanted(cfg) || s.wanted(def) {
			t.Errorf("sidecar %s: wanted by the default configuration, or not by its option %s", s.what, s.option)
		}
		if spec := s.spec(c); len(spec.Ports) != 1 {
			t.Errorf("sidecar %s: ports %+v, want one published", s.what, spec.Ports)
		}
	}
	// The registry records its published port, the load balancer its
	// address, which replaces the control plane's as the API server.
	if err := c.setRegistryAddr(docker.Container{Name: "kt-x-registry", Ports: map[string]string{"5000/tcp": "127.0.0.1:40001"}}); err != nil || c.RegistryAddr() != "localhost:40001" {
		t.Errorf("registry recorded as %q, %v", c.RegistryAddr(), err)
	}
	if err := c.setLoadBalancer(docker.Container{Name: "kt-x-lb", IPs: map[string]string{"kt-x": "172.18.0.9"}, Ports: map[string]string{"6443/tcp": "127.0.0.1:40002"}}); err != nil || c.apiHost() != "172.18.0.9" {
		t.Errorf("load balancer recorded as %q, %v", c.apiHost(), err)
	}
	if err := c.setLoadBalancer(docker.Container{Name: "kt-x-lb"}); err == nil {
		t.Error("a load balancer without an address on the cluster's network was recorded")
	}
}
