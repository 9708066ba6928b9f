package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const pullAlwaysSrc = `package node

var _ = SIGDescribe("Images", func() {
	framework.ConformanceIt("pulls in its own body", func(ctx context.Context) {
		pod := volumePod(v1.PullAlways)
		_ = pod
	})
	framework.ConformanceIt("pulls through a helper's helper", func(ctx context.Context) {
		_ = createServer("ns")
	})
	framework.ConformanceIt("loads only", func(ctx context.Context) {
		_ = createInspector("ns")
	})
	f.It("is conformance by its argument", framework.WithConformance(), func(ctx context.Context) {
		c := v1.Container{ImagePullPolicy: v1.PullAlways}
		_ = c
	})
	f.It("is no conformance spec", f.WithNodeConformance(), func(ctx context.Context) {
		ImagePullTest(ctx, v1.PullAlways)
	})
})

func createServer(ns string) *appsv1.Deployment { return deployment(ns, serverContainer()) }

func serverContainer() v1.Container { return v1.Container{ImagePullPolicy: v1.PullAlways} }

func createInspector(ns string) *v1.Pod { return &v1.Pod{} }
`

func TestPullAlways(t *testing.T) {
	a, err := pullAlways([]byte(pullAlwaysSrc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pulls in its own body", "is conformance by its argument", "pulls through a helper's helper"}
	if a.file || len(a.texts) != len(want) {
		t.Fatalf("found %+v, want the specs %q", a, want)
	}
	for _, w := range want {
		if !slices.Contains(a.texts, w) {
			t.Errorf("%q not found: %q", w, a.texts)
		}
	}
	if !a.covers("[sig-node] Images pulls in its own body [Conformance]") || a.covers("[sig-node] Images loads only [Conformance]") {
		t.Errorf("covers: %+v", a)
	}

	// Set-up code around the specs: every spec of the file counts.
	setup := []byte(`package node
var _ = SIGDescribe("Images", func() {
	policy := v1.PullAlways
	framework.ConformanceIt("a", func(ctx context.Context) { run(policy) })
})
`)
	if a, err := pullAlways(setup); err != nil || !a.file || !a.covers("[sig-node] Images anything [Conformance]") {
		t.Errorf("set-up code: %+v, %v; want the whole file", a, err)
	}
	if a, err := pullAlways([]byte("package node\nfunc f() { g(v1.PullIfNotPresent) }\n")); err != nil || a.file || len(a.texts) != 0 {
		t.Errorf("no PullAlways: %+v, %v", a, err)
	}
	if _, err := pullAlways([]byte("package node\nfunc f( { v1.PullAlways }\n")); err == nil {
		t.Error("a source that does not parse was accepted")
	}
}

// In the Kubernetes release conformance/ builds, the conformance specs
// that pull with Always are the two the docs name (docs/conformance.md).
func TestPullAlwaysSpecsOfTheRelease(t *testing.T) {
	v, src := releaseSource(t)
	list, err := os.ReadFile(filepath.Join(src, "test", "conformance", "testdata", "conformance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	specs := parseConformanceList(list)
	got, err := pullAlwaysSpecs(src, specs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Codename)
	}
	want := []string{
		"[sig-auth] Projected PodCertificate [FeatureGate:PodCertificateRequest] [FeatureGate:ClusterTrustBundle] [FeatureGate:ClusterTrustBundleProjection] should allow server and client pods to establish an mTLS connection [MinimumKubeletVersion:1.37] [Conformance]",
		"[sig-node] ImageVolume should succeed with pod and pull policy of Always [LinuxOnly] [MinimumKubeletVersion:1.35] [Conformance]",
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("of %d conformance specs of %s, these pull with Always:\n%q\nwant\n%q", len(specs), v, names, want)
	}
	// The README's slice needs no registry.
	slice, err := selectSpecs(specs, sliceFocus, sliceSkip)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pullAlwaysSpecs(src, slice); err != nil || len(got) != 0 {
		t.Fatalf("the slice's specs that pull with Always: %v, %v; want none", got, err)
	}
}
