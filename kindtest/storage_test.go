package kindtest

import (
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/imageref"
)

// TestUnitStorageOption checks the default and WithoutStorage, and that a
// reused cluster is only attached to by runs that agree on storage.
func TestUnitStorageOption(t *testing.T) {
	def, err := newConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	without, err := newConfig([]Option{WithoutStorage()})
	if err != nil {
		t.Fatal(err)
	}
	if def.withoutStorage || !without.withoutStorage {
		t.Fatalf("withoutStorage: default %t, with WithoutStorage %t", def.withoutStorage, without.withoutStorage)
	}
	if reuseHash(def, "sha256:x") == reuseHash(without, "sha256:x") {
		t.Fatal("clusters with and without storage share a reuse hash")
	}
}

// TestUnitStorageManifest checks what the manifest is filled in with: the
// preloaded image, never pulled, and the default class.
func TestUnitStorageManifest(t *testing.T) {
	m := storageManifest("192.0.2.7", 6443)
	if strings.Contains(m, "{{") {
		t.Fatalf("unreplaced placeholder in the storage manifest:\n%s", m)
	}
	for _, want := range []string{
		"image: " + imageref.LocalPathProvisioner + "\n",
		"--helper-image=" + imageref.LocalPathProvisioner + "\n",
		`"paths": ["` + StorageRoot + `"]`,
		"  name: " + StorageClassName + "\n",
		`storageclass.kubernetes.io/is-default-class: "true"`,
		"volumeBindingMode: WaitForFirstConsumer\n",
		"reclaimPolicy: Delete\n",
		"- name: KUBERNETES_SERVICE_HOST\n          value: \"192.0.2.7\"\n",
		"- name: KUBERNETES_SERVICE_PORT\n          value: \"6443\"\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("storage manifest lacks %q", want)
		}
	}
	if n, m := strings.Count(m, "image: "), strings.Count(m, "imagePullPolicy: IfNotPresent"); n != 2 || m != n {
		t.Errorf("storage manifest: %d images, %d with imagePullPolicy IfNotPresent; want 2 and 2", n, m)
	}
}
