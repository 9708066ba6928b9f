package main

import (
	"strings"
	"testing"
)

const manifestSrc = `
	configs[AgnhostPrev] = Config{list.PromoterE2eRegistry, "agnhost", "2.55"}
	configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}
	configs[AgnhostPrivate] = Config{list.PrivateRegistry, "agnhost", "2.6"}
	configs[BusyBox] = Config{list.PromoterE2eRegistry, "busybox", "1.37.0-2"}
	configs[Etcd] = Config{list.GcEtcdRegistry, "etcd", "3.7.0-0"}
	configs[InvalidRegistryImage] = Config{list.InvalidRegistry, "alpine", "3.1"}
	configs[Kitten] = Config{list.PromoterE2eRegistry, "kitten", "1.8"}
	configs[Nginx] = Config{list.PromoterE2eRegistry, "nginx", "1.27.0-2"}
	configs[Pause] = Config{list.GcRegistry, "pause", "3.10.2"}
	configs[Perl] = Config{list.PromoterE2eRegistry, "perl", "5.26"}
`

// What e2e.test --list-images printed for v1.37.2, in part.
const listedImages = `registry.k8s.io/e2e-test-images/busybox:1.37.0-2
gcr.io/k8s-authenticated-test/agnhost:2.6
registry.k8s.io/pause:3.10.2
registry.k8s.io/etcd:3.7.0-0
registry.k8s.io/e2e-test-images/agnhost:2.66.1
invalid.registry.k8s.io/invalid/alpine:3.1
registry.k8s.io/e2e-test-images/agnhost:2.55
registry.k8s.io/e2e-test-images/nginx:1.27.0-2
registry.k8s.io/e2e-test-images/kitten:1.8
registry.k8s.io/e2e-test-images/perl:5.26
`

func TestImageReferences(t *testing.T) {
	configs := matchRefs(parseManifest([]byte(manifestSrc)), listedImages)
	refs := map[string]string{}
	for _, c := range configs {
		refs[c.ID] = c.Ref
	}
	want := map[string]string{
		"Agnhost":              "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
		"AgnhostPrev":          "registry.k8s.io/e2e-test-images/agnhost:2.55",
		"AgnhostPrivate":       "gcr.io/k8s-authenticated-test/agnhost:2.6",
		"BusyBox":              "registry.k8s.io/e2e-test-images/busybox:1.37.0-2",
		"Pause":                "registry.k8s.io/pause:3.10.2",
		"Etcd":                 "registry.k8s.io/etcd:3.7.0-0",
		"InvalidRegistryImage": "invalid.registry.k8s.io/invalid/alpine:3.1",
		"Nginx":                "registry.k8s.io/e2e-test-images/nginx:1.27.0-2",
		"Kitten":               "registry.k8s.io/e2e-test-images/kitten:1.8",
		"Perl":                 "registry.k8s.io/e2e-test-images/perl:5.26",
	}
	if len(refs) != len(want) {
		t.Fatalf("got %d images, want %d: %v", len(refs), len(want), refs)
	}
	for id, ref := range want {
		if refs[id] != ref {
			t.Errorf("%s: ref %q, want %q", id, refs[id], ref)
		}
	}
}

func TestDecide(t *testing.T) {
	configs := matchRefs(parseManifest([]byte(manifestSrc)), listedImages)
	users := map[string][]fileUse{
		"AgnhostPrev":          {{File: "test/e2e/apps/deployment.go", Specs: 8}},
		"Kitten":               {{File: "test/e2e/common/node/image_volume.go", Specs: 1}},
		"Nginx":                {{File: "test/e2e/apps/rc.go", Specs: 6}},
		"InvalidRegistryImage": {{File: "test/e2e/common/node/runtime.go", Specs: 5}},
	}
	plans := decide(configs, users, []string{"BusyBox"}, sourceVersions{agnhost: "2.66.1", nonewprivs: "1.4"}, "v1.37.2")
	got := map[string]imagePlan{}
	for _, p := range plans {
		got[p.ID] = p
	}
	// Perl, Etcd and AgnhostPrivate are named by no conformance spec file.
	for _, id := range []string{"Perl", "Etcd", "AgnhostPrivate"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s is planned, but no conformance spec names it", id)
		}
	}
	check := func(id string, built, unmet bool) {
		t.Helper()
		p, ok := got[id]
		if !ok {
			t.Fatalf("%s not planned", id)
		}
		if p.Built != built || p.unmet() != unmet {
			t.Errorf("%s: built %t unmet %t, want built %t unmet %t (%s)", id, p.Built, p.unmet(), built, unmet, p.How)
		}
	}
	check("Agnhost", true, false)
	check("BusyBox", true, false)
	check("AgnhostPrev", true, true) // a stand-in: the module's agnhost is 2.66.1
	check("Kitten", true, true)      // a stand-in: the module's html is kitten 1.9's
	check("Nginx", true, true)       // a stand-in
	check("InvalidRegistryImage", false, false)
	check("Pause", false, true) // until the node image is checked

	// Without a spec file or template that runs BusyBox, it is not built.
	for _, p := range decide(configs, users, nil, sourceVersions{agnhost: "2.66.1", nonewprivs: "1.4"}, "v1.37.2") {
		if p.ID == "BusyBox" {
			t.Errorf("BusyBox planned though no spec file runs it: %s", p.How)
		}
	}

	d := got["AgnhostPrev"].describe()
	if got["AgnhostPrev"].StandInFor != "agnhost:2.66.1" {
		t.Errorf("AgnhostPrev stands in for %q", got["AgnhostPrev"].StandInFor)
	}
	for _, want := range []string{"SUBSTITUTE registry.k8s.io/e2e-test-images/agnhost:2.55 (AgnhostPrev)", "agnhost 2.66.1 (this module's) under the 2.55 tag", "apps/deployment.go (8)"} {
		if !strings.Contains(d, want) {
			t.Errorf("description %q lacks %q", d, want)
		}
	}
	if d := got["Kitten"].describe(); !strings.HasPrefix(d, "SUBSTITUTE registry.k8s.io/e2e-test-images/kitten:1.8 (Kitten)") || !strings.Contains(d, "test/images/kitten/html") {
		t.Errorf("kitten description %q", d)
	}
	if d := got["Nginx"].describe(); !strings.HasPrefix(d, "SUBSTITUTE ") {
		t.Errorf("nginx description %q", d)
	}
}

func TestParseConformanceList(t *testing.T) {
	data := []byte(`- testname: Priority and Fairness FlowSchema API
  codename: '[sig-api-machinery] API priority and fairness should support FlowSchema
    API operations [Conformance]'
  description: ' The flowcontrol API group MUST exist.'
  release: v1.29
  file: test/e2e/apimachinery/flowcontrol.go
- testname: Pod's hostname
  codename: '[sig-node] Pods should get a host''s IP [NodeConformance] [Conformance]'
  description: x
  file: test/e2e/common/node/pods.go
`)
	specs := parseConformanceList(data)
	if len(specs) != 2 {
		t.Fatalf("%d specs", len(specs))
	}
	if specs[0].Codename != "[sig-api-machinery] API priority and fairness should support FlowSchema API operations [Conformance]" || specs[0].File != "test/e2e/apimachinery/flowcontrol.go" {
		t.Errorf("first spec %+v", specs[0])
	}
	if specs[1].Codename != "[sig-node] Pods should get a host's IP [NodeConformance] [Conformance]" {
		t.Errorf("second spec %+v", specs[1])
	}
}

func TestNamedImages(t *testing.T) {
	src := []byte("img := imageutils.GetE2EImage(imageutils.AgnhostPrev)\nx := e2eimage.BusyBox\n// imageutils.Agnhostish\n")
	got := namedImages(src, []string{"Agnhost", "AgnhostPrev", "BusyBox", "Nginx"})
	if strings.Join(got, ",") != "AgnhostPrev,BusyBox" {
		t.Fatalf("named %v", got)
	}
	// BusyBox through the framework's pod helpers, and not for a file
	// that calls none of them (a Services spec's exec pod is agnhost).
	helper := []byte("pod := e2epod.MakePod(ns, nil, nil, f.NamespacePodSecurityLevel, \"true\")\n")
	if got := namedImages(helper, []string{"Agnhost", "BusyBox"}); strings.Join(got, ",") != "BusyBox" {
		t.Errorf("for a MakePod call: named %v, want BusyBox", got)
	}
	services := []byte("execPod := e2epod.CreateExecPodOrFail(ctx, cs, ns, \"execpod\", nil)\npods.Create(ctx, pod, metav1.CreateOptions{})\n_, err := jig.CreateDeployment(spec)\n")
	if got := namedImages(services, []string{"Agnhost", "BusyBox"}); len(got) != 0 {
		t.Errorf("for an exec pod: named %v, want none", got)
	}
}

func TestBusyboxRelease(t *testing.T) {
	if got := busyboxRelease("BusyBox v1.37.0 (Debian 1:1.37.0-6) multi-call binary.\nUsage: ..."); got != "1.37.0" {
		t.Fatalf("release %q", got)
	}
}

func TestSelectSpecs(t *testing.T) {
	specs := []conformanceSpec{
		{Codename: "[sig-network] Services should serve a basic endpoint from pods [Conformance]", File: "test/e2e/network/service.go"},
		{Codename: "[sig-network] Services should serve endpoints on same port and different protocols [Conformance]", File: "test/e2e/network/service.go"},
		{Codename: "[sig-network] DNS should provide DNS for services [Conformance]", File: "test/e2e/network/dns.go"},
		{Codename: "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]", File: "test/e2e/common/node/pods.go"},
	}
	for _, tc := range []struct {
		focus, skip string
		want        int
	}{
		{"", "", 4},
		{`\[sig-network\] (Services|DNS) `, "", 3},
		{`\[sig-network\] (Services|DNS) `, "different protocols", 2},
		{"", `\[sig-node\]`, 3},
		{"nothing like it", "", 0},
	} {
		got, err := selectSpecs(specs, tc.focus, tc.skip)
		if err != nil || len(got) != tc.want {
			t.Errorf("selectSpecs(focus %q, skip %q) = %d specs, %v; want %d", tc.focus, tc.skip, len(got), err, tc.want)
		}
	}
	for _, args := range [][]string{{"-focus", "[sig-network"}, {"-skip", "a(b"}} {
		var stderr strings.Builder
		_, err := parseFlags(args, &stderr)
		if err == nil || !strings.Contains(err.Error(), args[0]+" ") || !strings.Contains(err.Error(), "missing closing") {
			t.Errorf("parseFlags(%q) = %v; want the flag and the expression's fault", args, err)
		}
	}
}
