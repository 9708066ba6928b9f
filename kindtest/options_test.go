package kindtest

import (
	"cmp"
	"fmt"
	"reflect"
	"testing"
)

// nonShape are the config fields that are not part of a reusable
// cluster's shape, and why: reuse matches clusters by the shape alone.
var nonShape = map[string]string{
	"image":         "in the reuse hash by the image's ID, so that a rebuilt image makes a new cluster",
	"logger":        "where progress goes",
	"createTimeout": "how long creation may take",
	"deleteTimeout": "how long removal may take",
	"keep":          "a reusable cluster is kept whatever the policy",
	"artifactsDir":  "where logs go",
	"reuse":         "reuse itself",
	"runtime":       "set only by tests",
	"initWrapper":   "set only by tests",
	"pool":          "which pool made the cluster, set only by the pool; a claim matches by shape",
}

// TestConfigFieldsAreShapeOrNot fails when a config field is neither part
// of shape nor on nonShape's list: a new option must say whether it
// changes what a reusable cluster is.
func TestConfigFieldsAreShapeOrNot(t *testing.T) {
	ct := reflect.TypeFor[config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if f.Anonymous && f.Type == reflect.TypeFor[shape]() {
			continue
		}
		if nonShape[f.Name] == "" {
			t.Errorf("config field %s is neither in shape (what reuse matches clusters by) nor on nonShape's list: put it in shape, or on the list with the reason", f.Name)
		}
	}
}

// TestReuseHashCoversShape checks that each shape field changes the reuse
// hash, and that the same options hash the same: every field of shape
// must be changed by one of the option sets below.
func TestReuseHashCoversShape(t *testing.T) {
	t.Setenv(envImage, "")
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(v, "")
	}
	def, err := newConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	sets := [][]Option{
		{WithWorkers(1)},
		{WithControlPlanes(3)},
		{WithoutKubernetes()},
		{WithNamePrefix("other")},
		{WithFeatureGates(map[string]bool{"ContainerStopSignals": true})},
		{WithNodeLabels(0, map[string]string{"a": "b"})},
		{WithKubeletConfig("maxPods: 50")},
		{WithPortMapping(0, 30080)},
		{WithRegistry()},
		{WithRegistryMirror("docker.io", "http://a:5000")},
		{WithRegistryMirror("docker.io", "http://b:5000")},
		{WithoutDefaultCNI()},
		{WithoutStorage()},
		{WithoutNetworkPolicy()},
		{WithProxy("http://proxy.example.com:3128", "", "")},
		{WithKubeProxyMode(KubeProxyNFTables)},
		{WithKubeProxyMode(KubeProxyIPVS)},
		{WithPodSubnet("10.123.0.0/16")},
		{WithoutLoadBalancer()},
		{WithServiceSubnet("10.124.0.0/16")},
		{WithIPFamily(DualStack)},
	}
	seen := map[string]int{reuseHash(def, "img"): -1}
	changed := map[string]bool{}
	st := reflect.TypeFor[shape]()
	for i, opts := range sets {
		cfg, err := newConfig(opts)
		if err != nil {
			t.Fatalf("options %d: %v", i, err)
		}
		h := reuseHash(cfg, "img")
		if j, ok := seen[h]; ok {
			t.Errorf("options %d hash as options %d do (-1: the defaults)", i, j)
		}
		seen[h] = i
		again, _ := newConfig(opts)
		if reuseHash(again, "img") != h {
			t.Errorf("options %d hash differently twice", i)
		}
		a, b := reflect.ValueOf(def.shape), reflect.ValueOf(cfg.shape)
		for f := range st.NumField() {
			if fmt.Sprintf("%#v", a.Field(f)) != fmt.Sprintf("%#v", b.Field(f)) {
				changed[st.Field(f).Name] = true
			}
		}
	}
	for f := range st.NumField() {
		if name := st.Field(f).Name; !changed[name] {
			t.Errorf("shape field %s is changed by none of the option sets: add one that changes it", name)
		}
	}
	if reuseHash(def, "img") == reuseHash(def, "other-img") {
		t.Error("another node image hashes the same")
	}
}

// TestImage checks that Image names what a config without WithImage uses.
func TestImage(t *testing.T) {
	for _, env := range []string{"", "registry.example.com/kindtest/node:v1"} {
		t.Setenv(envImage, env)
		want := cmp.Or(env, DefaultImage)
		if got := Image(); got != want {
			t.Errorf("KINDTEST_IMAGE=%q: Image() = %q, want %q", env, got, want)
		}
		cfg, err := newConfig(nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.image != want {
			t.Errorf("KINDTEST_IMAGE=%q: config image %q, want %q", env, cfg.image, want)
		}
	}
}
