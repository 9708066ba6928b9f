package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name (rewritten with -update-golden
// after a deliberate change: read the diff).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the rendered output (run with -update-golden after a deliberate change):\n%s", file, got)
	}
}

// yamlDocs decodes every document of s.
func yamlDocs(t *testing.T, s string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(s))
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("document %d is not YAML: %v\n%s", len(docs), err, s)
		}
		docs = append(docs, doc)
	}
}

func TestKubeletConfigGolden(t *testing.T) {
	k := KubeletConfig{
		CgroupV1: true,
		Fields: map[string]any{
			"maxPods":        50,
			"evictionHard":   map[string]any{"memory.available": "1Mi"},
			"systemReserved": map[string]any{"cpu": "100m", "memory": "100Mi"},
		},
		FeatureGates: map[string]bool{"ContainerStopSignals": true, "APIServerIdentity": false},
	}
	got := k.YAML()
	golden(t, "kubelet.golden", []byte(got))
	if docs := yamlDocs(t, got); len(docs) != 1 || docs[0]["kind"] != "KubeletConfiguration" {
		t.Errorf("not one KubeletConfiguration:\n%s", got)
	}
	// Merging copies: the caller's fields are left as they were.
	if len(k.Fields["evictionHard"].(map[string]any)) != 1 {
		t.Errorf("the caller's fields were changed: %v", k.Fields)
	}
	v2 := KubeletConfig{}.YAML()
	if strings.Contains(v2, "failCgroupV1") || strings.Contains(v2, "featureGates") || !strings.Contains(v2, "cgroupDriver: systemd\n") {
		t.Errorf("cgroup v2 default: want the systemd driver, no failCgroupV1 and no gates:\n%s", v2)
	}
}

func TestMerge(t *testing.T) {
	dst := map[string]any{"a": map[string]any{"x": 1, "y": 2}, "b": 1}
	src := map[string]any{"a": map[string]any{"y": 3}, "b": map[string]any{"z": 4}, "c": []any{1}}
	Merge(dst, src)
	want := map[string]any{"a": map[string]any{"x": 1, "y": 3}, "b": map[string]any{"z": 4}, "c": []any{1}}
	got, _ := json.Marshal(dst)
	if w, _ := json.Marshal(want); !bytes.Equal(got, w) {
		t.Errorf("merged %s, want %s", got, w)
	}
	src["b"].(map[string]any)["z"] = 5
	if dst["b"].(map[string]any)["z"] != 4 {
		t.Error("a mapping of src is shared with dst")
	}
}

func TestCNIConfigGolden(t *testing.T) {
	got := CNIConfig("10.244.3.0/24")
	golden(t, "cni.golden", got)
	var list struct {
		CNIVersion string
		Plugins    []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(got, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Plugins) != 2 || list.Plugins[0].Type != "bridge" || list.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.3.0/24" || list.Plugins[1].Type != "portmap" {
		t.Errorf("want a bridge on 10.244.3.0/24, then portmap:\n%s", got)
	}
}
