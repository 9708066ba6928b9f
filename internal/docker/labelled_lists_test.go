package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// anyLabelEngine answers lists the way podman 4.3 answers a volume list:
// an object matches when any one of the label filters does, not all.
func anyLabelEngine(t *testing.T) *Client {
	t.Helper()
	objects := []map[string]string{
		{"dev.kindtest.cluster": "a", "dev.kindtest.session": "s1"},
		{"dev.kindtest.cluster": "a", "dev.kindtest.session": "s2"},
		{"dev.kindtest.cluster": "b", "dev.kindtest.session": "s1"},
		{"dev.kindtest.cluster": "c"},
	}
	names := []string{"a-s1", "a-s2", "b-s1", "c"}
	matching := func(r *http.Request) []int {
		var f map[string]map[string]bool
		if err := json.Unmarshal([]byte(r.URL.Query().Get("filters")), &f); err != nil {
			t.Errorf("filters %q: %v", r.URL.Query().Get("filters"), err)
		}
		var out []int
		for i, labels := range objects {
			for sel := range f["label"] {
				k, v, _ := strings.Cut(sel, "=")
				if got, ok := labels[k]; ok && (v == "" || got == v) {
					out = append(out, i)
					break
				}
			}
		}
		return out
	}
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", "1.41")
		w.Header().Set("OSType", "linux")
	})
	mux.HandleFunc("/v1.41/containers/json", func(w http.ResponseWriter, r *http.Request) {
		var out []map[string]any
		for _, i := range matching(r) {
			out = append(out, map[string]any{"Id": names[i], "Names": []string{"/" + names[i]}, "Labels": objects[i], "State": "running"})
		}
		reply(w, out)
	})
	mux.HandleFunc("/v1.41/volumes", func(w http.ResponseWriter, r *http.Request) {
		var out []map[string]any
		for _, i := range matching(r) {
			out = append(out, map[string]any{"Name": names[i], "Labels": objects[i]})
		}
		reply(w, map[string]any{"Volumes": out})
	})
	mux.HandleFunc("/v1.41/networks", func(w http.ResponseWriter, r *http.Request) {
		var out []map[string]any
		for _, i := range matching(r) {
			out = append(out, map[string]any{"Id": names[i], "Name": names[i], "Labels": objects[i]})
		}
		reply(w, out)
	})
	c, err := NewHost(context.Background(), serveUnix(t, mux))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestListsMatchEveryLabel: what a list returns carries every label of
// the selector, even from an engine whose filter matches any of them
// (podman 4.3's volume list): the reaper read another session's keep
// label as its own through it, and kept a cluster it had to remove.
func TestListsMatchEveryLabel(t *testing.T) {
	c := anyLabelEngine(t)
	ctx := context.Background()
	sel := map[string]string{"dev.kindtest.cluster": "a", "dev.kindtest.session": "s1"}
	want := []string{"a-s1"}
	cs, err := c.ListContainers(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := c.ListVolumes(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := c.ListNetworks(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	var gotC, gotV, gotN []string
	for _, x := range cs {
		gotC = append(gotC, x.Name)
	}
	for _, x := range vs {
		gotV = append(gotV, x.Name)
	}
	for _, x := range ns {
		gotN = append(gotN, x.Name)
	}
	for what, got := range map[string][]string{"containers": gotC, "volumes": gotV, "networks": gotN} {
		if !slices.Equal(got, want) {
			t.Errorf("%s with %v: %v, want %v", what, sel, got, want)
		}
	}
	// A key without a value selects every object that has the key.
	vs, err = c.ListVolumes(ctx, map[string]string{"dev.kindtest.session": ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 {
		t.Errorf("volumes with the session key: %v, want the 3 that have it", vs)
	}
}
