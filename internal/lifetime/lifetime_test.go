package lifetime

import (
	"strings"
	"testing"
)

func TestOutlives(t *testing.T) {
	// Deleted is in none of the wants: nothing outlives its deletion.
	all := []Outcome{Passed, Failed, Interrupted, Vanished, Deleted}
	for _, tc := range []struct {
		keeps []string
		want  map[Outcome]bool // outcomes for which the cluster outlives
	}{
		{[]string{KeepNever}, nil},
		{[]string{""}, nil},
		{[]string{KeepAlways}, map[Outcome]bool{Passed: true, Failed: true, Interrupted: true, Vanished: true}},
		{[]string{KeepOnFailure}, map[Outcome]bool{Failed: true}},
		// A reusable cluster outlives its run only once marked complete.
		{[]string{KeepReuse}, nil},
		{[]string{KeepReuse, Kept}, map[Outcome]bool{Passed: true, Failed: true, Interrupted: true, Vanished: true}},
		// Kept after a failure: the sweep and the reaper leave it too.
		{[]string{KeepOnFailure, Kept}, map[Outcome]bool{Passed: true, Failed: true, Interrupted: true, Vanished: true}},
	} {
		for _, o := range all {
			if got := Outlives(tc.keeps, o); got != tc.want[o] {
				t.Errorf("Outlives(%q, %s) = %t, want %t", tc.keeps, o, got, tc.want[o])
			}
		}
	}
}

func TestCheckClusterName(t *testing.T) {
	for _, bad := range []string{"", " ", "\t", "Kt-1", "kt_1", "-kt", "kt-", "kt 1", "a/b"} {
		if CheckClusterName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"kt-0123abcd", "child-1", "a"} {
		if err := CheckClusterName(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

func TestImageKubernetesVersion(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{LabelImageKubernetesVersion: "v1.37.2"}, "v1.37.2"},
		{map[string]string{LegacyLabelImageKubernetesVersion: "v1.36.3"}, "v1.36.3"},
		{map[string]string{LabelImageKubernetesVersion: "v1.37.2", LegacyLabelImageKubernetesVersion: "v1.36.3"}, "v1.37.2"},
		{nil, ""},
	} {
		if got := ImageKubernetesVersion(tc.labels); got != tc.want {
			t.Errorf("ImageKubernetesVersion(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}

// TestOneNamespace holds every key to the one namespace, in the form of
// the system that keeps it.
func TestOneNamespace(t *testing.T) {
	engine := []string{LabelCluster, LabelSession, LabelRole, LabelNodeIndex, LabelOwnerHost, LabelOwnerPID,
		LabelOwnerStart, LabelCreated, LabelKeep, LabelReuse, LabelReaper, LabelImageContentHash,
		LabelImageKubernetesVersion, LabelImageBinaryHash, LabelBuild, LabelImageID, LabelTestEngine}
	for _, k := range engine {
		if !strings.HasPrefix(k, "dev.kindtest.") {
			t.Errorf("engine label %q is not in dev.kindtest.", k)
		}
	}
	for _, k := range []string{KubeLabelCluster, KubeLabelSession, KubeLabelNodeIndex, KubeAnnotationTest} {
		if !strings.HasPrefix(k, "kindtest.dev/") {
			t.Errorf("Kubernetes label %q is not in kindtest.dev/", k)
		}
	}
}
