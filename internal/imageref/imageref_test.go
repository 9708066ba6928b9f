package imageref

import "testing"

func TestBeside(t *testing.T) {
	for _, tc := range []struct{ node, image, want string }{
		{"registry.example.com/team/kindtest/node:v1.37.2", Reaper, "registry.example.com/team/kindtest/reaper:v3"},
		{"registry.example.com:5000/node:v1.37.2", Registry, "registry.example.com:5000/registry:v3.1.2"},
		{"localhost:5000/kindtest/node@sha256:abc", LoadBalancer, "localhost:5000/kindtest/lb:v1"},
		{"localhost:5000/kindtest/node", Reaper, "localhost:5000/kindtest/reaper:v3"},
	} {
		if got := Beside(tc.node, tc.image); got != tc.want {
			t.Errorf("Beside(%s, %s) = %s, want %s", tc.node, tc.image, got, tc.want)
		}
	}
}
