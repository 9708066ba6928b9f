package kindtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/imageref"
)

func TestNetworkingOptionsValidate(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, tc := range []struct {
		name string
		opts []Option
		want []string
	}{
		{"mirror endpoint not a URL", []Option{WithRegistryMirror("docker.io", "mirror.example.com:5000")}, []string{`endpoint "mirror.example.com:5000"`, "http:// or https:// URL"}},
		{"mirror endpoint other scheme", []Option{WithRegistryMirror("docker.io", "ftp://mirror.example.com")}, []string{"http:// or https:// URL"}},
		{"mirror endpoint without host", []Option{WithRegistryMirror("docker.io", "http://")}, []string{"http:// or https:// URL"}},
		{"mirror empty host", []Option{WithRegistryMirror("", "http://mirror.example.com")}, []string{"empty host", "docker.io"}},
		{"mirror host with scheme", []Option{WithRegistryMirror("https://docker.io", "http://mirror.example.com")}, []string{`host "https://docker.io"`, "without scheme"}},
		{"mirror host with path", []Option{WithRegistryMirror("docker.io/library", "http://mirror.example.com")}, []string{"without scheme or path"}},
		{"no CNI without Kubernetes", []Option{WithoutDefaultCNI(), WithoutKubernetes()}, []string{"WithoutDefaultCNI", "WithoutKubernetes"}},
		{"all reported together", []Option{WithoutDefaultCNI(), WithoutKubernetes(), WithRegistryMirror("", "nope"), WithWorkers(-1)},
			[]string{"WithoutDefaultCNI", "empty host", `endpoint "nope"`, "negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.opts...)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrDockerUnavailable) {
				t.Fatalf("bad options reported as a missing engine: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	for _, ok := range [][]Option{
		{WithRegistry()},
		{WithRegistryMirror("docker.io", "http://mirror.example.com:5000")},
		{WithRegistryMirror("_default", "https://mirror.example.com/v2-proxy")},
		{WithRegistryMirror("localhost:5001", "http://10.0.0.1:5000")},
		{WithoutDefaultCNI(), WithWorkers(2)},
		{WithRegistry(), WithoutKubernetes(), WithRegistryMirror("docker.io", "http://m:5000")},
	} {
		if _, err := newConfig(ok); err != nil {
			t.Errorf("valid options refused: %v", err)
		}
	}
}

func TestWithoutDefaultCNIConfig(t *testing.T) {
	cfg, err := newConfig([]Option{WithoutDefaultCNI(), WithWorkers(1)})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: cfg, identity: identity{name: "c"}}
	cp := &Node{name: "c-control-plane", ip: "172.18.0.2"}
	w := &Node{name: "c-worker", ip: "172.18.0.3", index: 1}
	c.nodes = []*Node{cp, w}
	p := c.initParams(&creation{}, cp)
	if p.podRanges != podRangesAllocated {
		t.Error("WithoutDefaultCNI: the controller-manager is not told to allocate pod ranges")
	}
	p.podRanges = podRangesFixed
	const allocate = "  - name: allocate-node-cidrs\n    value: \"%t\""
	if fixed := kubeadmInitConfig(p); !strings.Contains(fixed, fmt.Sprintf(allocate, false)) {
		t.Errorf("the default pod network: the controller-manager must not allocate pod ranges:\n%s", fixed)
	}
	p.podRanges = podRangesAllocated
	if got := kubeadmInitConfig(p); !strings.Contains(got, fmt.Sprintf(allocate, true)) {
		t.Errorf("WithoutDefaultCNI: the controller-manager must allocate pod ranges:\n%s", got)
	}
	// The script's arguments are the pod network's: none without it.
	if args := nodeNetworkCommand(c, w)[4:]; len(args) != 0 {
		t.Errorf("WithoutDefaultCNI node network arguments %q, want none", args)
	}

	def, _ := newConfig(nil)
	c.cfg = def
	if c.initParams(&creation{}, cp).podRanges != podRangesFixed {
		t.Error("the default pod network: the controller-manager is told to allocate pod ranges")
	}
	args := nodeNetworkCommand(c, w)[4:]
	if want := []string{"on", "masquerade", "10.244.1.0/24", defaultPodSubnet, "route", "10.244.0.0/24", "172.18.0.2"}; len(args) != 8 || !slices.Equal(args[1:], want) || !strings.Contains(args[0], `"subnet": "10.244.1.0/24"`) {
		t.Errorf("default node network arguments %q, want the CNI configuration then %q", args, want)
	}
}

func TestRegistryEndpoint(t *testing.T) {
	if want := fmt.Sprintf("http://%s:%d", registryAlias, imageref.RegistryPort); RegistryEndpoint != want {
		t.Errorf("RegistryEndpoint %s, want %s", RegistryEndpoint, want)
	}
}
