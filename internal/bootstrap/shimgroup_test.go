package bootstrap

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// shimGroups returns, for each Deployment and DaemonSet in manifests, its
// kind and name and the shim group its pod template names ("" for none).
func shimGroups(t *testing.T, manifests string) []string {
	t.Helper()
	var got []string
	for _, d := range yamlDocs(t, manifests) {
		kind, _ := d["kind"].(string)
		if kind != "Deployment" && kind != "DaemonSet" {
			continue
		}
		name, _ := dig(d, "metadata", "name").(string)
		group, _ := dig(d, "spec", "template", "metadata", "annotations", ShimGroupAnnotation).(string)
		got = append(got, kind+" "+name+": "+group)
	}
	return got
}

// dig follows keys through nested maps, nil where one is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestGroupShims annotates the pod template of each workload of kubeadm's
// printed add-ons, keeping the template's other annotations and every
// other document, in order.
func TestGroupShims(t *testing.T) {
	printed, err := os.ReadFile("testdata/coredns-kubeadm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	proxy := `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-proxy
  namespace: kube-system
spec:
  template:
    metadata:
      annotations:
        keep: "yes"
      labels:
        k8s-app: kube-proxy
    spec:
      containers:
      - name: kube-proxy
`
	in := proxy + "---\n" + string(printed)
	got, err := GroupShims(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"DaemonSet kube-proxy: kube-system", "Deployment coredns: kube-system"}; !slices.Equal(shimGroups(t, got), want) {
		t.Errorf("workloads %q, want %q", shimGroups(t, got), want)
	}
	if keep := dig(yamlDocs(t, got)[0], "spec", "template", "metadata", "annotations", "keep"); keep != "yes" {
		t.Errorf("the template's own annotation is %v, want kept", keep)
	}
	var kindsIn, kindsOut []any
	for _, d := range yamlDocs(t, in) {
		kindsIn = append(kindsIn, d["kind"])
	}
	for _, d := range yamlDocs(t, got) {
		kindsOut = append(kindsOut, d["kind"])
	}
	if !slices.Equal(kindsIn, kindsOut) {
		t.Errorf("documents %v, want %v", kindsOut, kindsIn)
	}

	if _, err := GroupShims("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec: {}\n"); err == nil || !strings.Contains(err.Error(), "Deployment x has no pod template") {
		t.Errorf("a Deployment without a template: %v, want an error naming it", err)
	}
	if _, err := GroupShims("kind: [\n"); err == nil {
		t.Error("broken YAML: no error")
	}
}

// TestAddonsShareTheSystemShim: every workload kindtest creates itself is
// in the system shim group, and every static pod gets a patch.
func TestAddonsShareTheSystemShim(t *testing.T) {
	storage := StorageAddon{Image: "kindtest.invalid/local-path-provisioner:v0", Class: "standard", Root: "/var/local-path", APIHost: "192.0.2.7", APIPort: 6443}.Manifest()
	netpol := NetworkPolicyAddon{Image: "kindtest.invalid/kube-network-policies:v0", Name: "kube-network-policies", APIHost: "192.0.2.7", APIPort: 6443}.Manifest()
	got := append(shimGroups(t, storage), shimGroups(t, netpol)...)
	want := []string{"Deployment local-path-provisioner: " + SystemShimGroup, "DaemonSet kube-network-policies: " + SystemShimGroup}
	if !slices.Equal(got, want) {
		t.Errorf("late add-ons' workloads %q, want %q", got, want)
	}

	var targets []string
	for _, f := range ShimGroupPatches() {
		if !strings.HasPrefix(f.Path, KubeadmPatchesDir+"/") {
			t.Errorf("patch %s is not in %s", f.Path, KubeadmPatchesDir)
		}
		targets = append(targets, strings.TrimSuffix(strings.TrimPrefix(f.Path, KubeadmPatchesDir+"/"), "+strategic.yaml"))
		if group := dig(yamlDocs(t, f.Content)[0], "metadata", "annotations", ShimGroupAnnotation); group != SystemShimGroup {
			t.Errorf("patch %s sets the group %v, want %s:\n%s", f.Path, group, SystemShimGroup, f.Content)
		}
	}
	if want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}; !slices.Equal(targets, want) {
		t.Errorf("patch targets %q, want %q", targets, want)
	}
	if init := (InitConfig{PatchesDir: KubeadmPatchesDir}).YAML(); !strings.Contains(init, "\npatches:\n  directory: "+KubeadmPatchesDir+"\n") {
		t.Errorf("the init configuration does not name the patches:\n%s", init)
	}
	if init := (InitConfig{}).YAML(); strings.Contains(init, "patches:") {
		t.Errorf("the configuration without patches names some:\n%s", init)
	}
	if worker := (JoinConfig{}).YAML(); strings.Contains(worker, "patches:") {
		t.Errorf("a worker's join configuration names patches it has no static pods for:\n%s", worker)
	}
	if cp := (JoinConfig{ControlPlaneAddress: "192.0.2.8", PatchesDir: KubeadmPatchesDir}).YAML(); !strings.Contains(cp, "\npatches:\n  directory: "+KubeadmPatchesDir+"\n") {
		t.Errorf("a control plane's join configuration does not name the patches:\n%s", cp)
	}
}
