package kindtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// hostHandlers is what the test process serves to the cluster: a
// validating webhook that denies ConfigMaps holding the key "forbidden",
// a mutating one that labels them, a conversion webhook between Thingy
// v1 (spec.color) and v2 (spec.colour), and the aggregated API
// flavours.kindtest.dev/v1 with one resource, flavours.
type hostHandlers struct {
	validated, mutated, converted, aggregated atomic.Int32
}

func (h *hostHandlers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/validate" || r.URL.Path == "/mutate":
		var review struct {
			Request struct {
				UID    string `json:"uid"`
				Object struct {
					Data map[string]string `json:"data"`
				} `json:"object"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := map[string]any{"uid": review.Request.UID, "allowed": true}
		if r.URL.Path == "/validate" {
			h.validated.Add(1)
			if _, bad := review.Request.Object.Data["forbidden"]; bad {
				resp["allowed"] = false
				resp["status"] = map[string]any{"code": 403, "message": "the test process says no"}
			}
		} else {
			h.mutated.Add(1)
			patch := `[{"op":"add","path":"/metadata/annotations","value":{"mutated-by":"test-process"}}]`
			resp["patchType"] = "JSONPatch"
			resp["patch"] = []byte(patch) // base64 in JSON
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
	case r.URL.Path == "/convert":
		h.converted.Add(1)
		var review struct {
			Request struct {
				UID               string           `json:"uid"`
				DesiredAPIVersion string           `json:"desiredAPIVersion"`
				Objects           []map[string]any `json:"objects"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var out []map[string]any
		for _, o := range review.Request.Objects {
			spec, _ := o["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
			}
			switch review.Request.DesiredAPIVersion {
			case "hostserver.kindtest.dev/v2":
				if v, ok := spec["color"]; ok {
					spec["colour"] = v
					delete(spec, "color")
				}
			case "hostserver.kindtest.dev/v1":
				if v, ok := spec["colour"]; ok {
					spec["color"] = v
					delete(spec, "colour")
				}
			}
			o["spec"] = spec
			o["apiVersion"] = review.Request.DesiredAPIVersion
			out = append(out, o)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
			"response": map[string]any{"uid": review.Request.UID, "convertedObjects": out, "result": map[string]any{"status": "Success"}}})
	case r.URL.Path == "/apis":
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{map[string]any{
			"name": "flavours.kindtest.dev", "versions": []any{map[string]any{"groupVersion": "flavours.kindtest.dev/v1", "version": "v1"}},
			"preferredVersion": map[string]any{"groupVersion": "flavours.kindtest.dev/v1", "version": "v1"}}}})
	case r.URL.Path == "/apis/flavours.kindtest.dev/v1":
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "flavours.kindtest.dev/v1",
			"resources": []any{map[string]any{"name": "flavours", "singularName": "flavour", "namespaced": true, "kind": "Flavour", "verbs": []any{"get", "list"}}}})
	case strings.HasPrefix(r.URL.Path, "/apis/flavours.kindtest.dev/v1/") && strings.HasSuffix(r.URL.Path, "/flavours"):
		h.aggregated.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "FlavourList", "apiVersion": "flavours.kindtest.dev/v1", "metadata": map[string]any{},
			"items": []any{map[string]any{"kind": "Flavour", "apiVersion": "flavours.kindtest.dev/v1",
				"metadata": map[string]any{"name": "served-by-the-test-process", "namespace": "default", "creationTimestamp": "2026-12-02T00:00:00Z"}}}})
	default:
		http.NotFound(w, r)
	}
}

// testHostServer checks ServeHTTPS and Install on cluster c: each kind of
// call the API server makes out to the test process works.
func testHostServer(ctx context.Context, t *testing.T, c *kindtest.Cluster) {
	h := &hostHandlers{}
	begin := time.Now()
	srv, err := c.ServeHTTPS(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	}()
	served := time.Now()
	dir := filepath.Join(fixture.Dir(), "hostserver")
	if err := srv.Install(ctx, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("host server at %s: ServeHTTPS %s, Install %s", srv.Addr(), served.Sub(begin).Round(time.Millisecond), time.Since(served).Round(time.Millisecond))
	ns := c.Namespace(t)

	// Validating: denied by the test process, at once after Install.
	bad := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, labels: {hostserver-test: \"true\"}}\ndata: {forbidden: \"1\"}\n"
	_, err = c.KubectlInput(ctx, strings.NewReader(bad), "create", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "the test process says no") {
		t.Errorf("a ConfigMap the validating webhook denies: %v", err)
	}
	// Mutating: annotated by the test process.
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good, labels: {hostserver-test: \"true\"}}\ndata: {fine: \"1\"}\n"
	if _, err := c.KubectlInput(ctx, strings.NewReader(good), "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Kubectl(ctx, "get", "configmap", "good", "-n", ns, "-o", "jsonpath={.metadata.annotations.mutated-by}")
	if err != nil || res.Stdout != "test-process" {
		t.Errorf("mutated-by annotation: %q %v", res.Stdout, err)
	}
	// Conversion: made as v1, read as v2.
	thing := "apiVersion: hostserver.kindtest.dev/v1\nkind: Thingy\nmetadata: {name: t1}\nspec: {color: teal}\n"
	if _, err := c.KubectlInput(ctx, strings.NewReader(thing), "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	res, err = c.Kubectl(ctx, "get", "thingies.v2.hostserver.kindtest.dev", "t1", "-n", ns, "-o", "jsonpath={.apiVersion} {.spec.colour}")
	if err != nil || res.Stdout != "hostserver.kindtest.dev/v2 teal" {
		t.Errorf("Thingy t1 read as v2: %q %v", res.Stdout, err)
	}
	// Aggregated API: kubectl get through the API server.
	res, err = c.Kubectl(ctx, "get", "flavours.flavours.kindtest.dev", "-n", "default")
	if err != nil || !strings.Contains(res.Stdout, "served-by-the-test-process") {
		t.Errorf("kubectl get flavours: %q %v", res.Stdout, err)
	}
	t.Logf("calls: validate %d, mutate %d, convert %d, aggregated list %d", h.validated.Load(), h.mutated.Load(), h.converted.Load(), h.aggregated.Load())
	if h.validated.Load() == 0 || h.mutated.Load() == 0 || h.converted.Load() == 0 || h.aggregated.Load() == 0 {
		t.Error("some webhook was never called")
	}

	// Install refuses other kinds before applying anything.
	if err := srv.Install(ctx, filepath.Join(fixture.Dir(), "crds", "widgets.yaml"), filepath.Join(fixture.Dir(), "manifests", "echo.yaml")); err == nil || !strings.Contains(err.Error(), "echo.yaml") || !strings.Contains(err.Error(), "Install takes") {
		t.Errorf("Install of a Deployment: %v", err)
	}

	// Close removes the webhook configurations and the APIService.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	res, err = c.Kubectl(ctx, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations,apiservices", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"hostserver-test-validating", "hostserver-test-mutating", "v1.flavours.kindtest.dev"} {
		if strings.Contains(res.Stdout, gone) {
			t.Errorf("%s is still there after Close", gone)
		}
	}
	if _, err := c.KubectlInput(ctx, strings.NewReader(strings.Replace(bad, "name: bad", "name: bad-after-close", 1)), "create", "-n", ns, "-f", "-"); err != nil {
		t.Errorf("after Close, the webhooks must be gone: %v", err)
	}
	// The CRD stays, converting nothing: its objects can still be read,
	// and the namespace holding one deleted (at the test's cleanup).
	res, err = c.Kubectl(ctx, "get", "crd", "thingies.hostserver.kindtest.dev", "-o", "jsonpath={.spec.conversion.strategy}")
	if err != nil || res.Stdout != "None" {
		t.Errorf("conversion of the CRD after Close: %q %v, want None", res.Stdout, err)
	}
	if _, err := c.Kubectl(ctx, "get", "thingies", "t1", "-n", ns); err != nil {
		t.Errorf("Thingy t1 after Close: %v", err)
	}
}
