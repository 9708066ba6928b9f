package main

import (
	"strings"
	"testing"
)

func TestMirrorRef(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/e2e-test-images/kitten:1.8":     "localhost:41234/e2e-test-images/kitten:1.8",
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1": "localhost:41234/e2e-test-images/agnhost:2.66.1",
		"registry.k8s.io/pause:3.10.2":                   "localhost:41234/pause:3.10.2",
	} {
		if got := mirrorRef("localhost:41234", ref); got != want {
			t.Errorf("mirrorRef(%s) = %s, want %s", ref, got, want)
		}
	}
}

func TestMarkMirrored(t *testing.T) {
	configs := matchRefs(parseManifest([]byte(manifestSrc)), listedImages)
	users := map[string][]fileUse{
		"Agnhost":              {{File: "test/e2e/auth/projected_podcertificate.go", Specs: 6}, {File: "test/e2e/network/service.go", Specs: 30}},
		"Kitten":               {{File: "test/e2e/common/node/image_volume.go", Specs: 1}},
		"BusyBox":              {{File: "test/e2e/common/node/image_volume.go", Specs: 1}},
		"Nginx":                {{File: "test/e2e/apps/rc.go", Specs: 6}},
		"InvalidRegistryImage": {{File: "test/e2e/common/node/image_volume.go", Specs: 1}},
	}
	plans := func() []imagePlan {
		return decide(configs, users, nil, sourceVersions{agnhost: "2.66.1", nonewprivs: "1.4"}, "v1.37.2")
	}
	mirrored := func(ps []imagePlan) string {
		var ids []string
		for _, p := range ps {
			if p.Mirror {
				ids = append(ids, p.ID)
			}
		}
		return strings.Join(ids, ",")
	}

	// No spec that pulls with Always: nothing mirrored, no registry.
	none := plans()
	markMirrored(none, nil)
	if got := mirrored(none); got != "" {
		t.Errorf("mirrored %s with no spec pulling with Always", got)
	}
	if opts := mirrorOptions(none); opts != nil {
		t.Errorf("%d cluster options with nothing mirrored; want none, the cluster as without a mirror", len(opts))
	}

	// The ImageVolume spec: its file's built images, not the one that
	// must not exist, nor pause (in the node image, not built).
	ps := plans()
	markMirrored(ps, []conformanceSpec{{Codename: "[sig-node] ImageVolume should succeed with pod and pull policy of Always", File: "test/e2e/common/node/image_volume.go"}})
	if got := mirrored(ps); got != "BusyBox,Kitten" {
		t.Errorf("mirrored %s for the ImageVolume spec, want BusyBox,Kitten", got)
	}
	// One registry (registry.k8s.io): WithRegistry and one mirror.
	if opts := mirrorOptions(ps); len(opts) != 2 {
		t.Errorf("%d cluster options, want WithRegistry and WithRegistryMirror", len(opts))
	}

	ps = plans()
	markMirrored(ps, []conformanceSpec{{File: "test/e2e/auth/projected_podcertificate.go"}, {File: "test/e2e/common/node/image_volume.go"}})
	if got := mirrored(ps); got != "Agnhost,BusyBox,Kitten" {
		t.Errorf("mirrored %s for both specs, want Agnhost,BusyBox,Kitten", got)
	}
	var b strings.Builder
	writeMirrorReport(&b, []conformanceSpec{{Codename: "[sig-node] ImageVolume x [Conformance]"}}, ps)
	for _, want := range []string{"1 selected conformance specs pull with imagePullPolicy Always", "registry.k8s.io/e2e-test-images/kitten:1.8", "  [sig-node] ImageVolume x [Conformance]\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("mirror report lacks %q:\n%s", want, b.String())
		}
	}
}
