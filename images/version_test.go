package images

import (
	"strings"
	"testing"
)

func TestValidateKubernetesVersion(t *testing.T) {
	for _, v := range []string{"v1.37.2", "v1.36.3", "v1.0.0", "v1.100.20"} {
		if err := validateKubernetesVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"", "1.36.3", "v1.36", "v1.36.3.1", "v1.36.3-rc.0", "v1.36.x",
		"v01.36.3", "v1.036.3", "v2.0.0", "v0.36.3", " v1.36.3", "v1.36.3\n", "latest"} {
		err := validateKubernetesVersion(v)
		if err == nil {
			t.Errorf("%q accepted", v)
			continue
		}
		if !strings.Contains(err.Error(), "vMAJOR.MINOR.PATCH") && !strings.Contains(err.Error(), "v1.MINOR.PATCH") {
			t.Errorf("%q: error %q does not say which form is wanted", v, err)
		}
	}
}

func TestWithKubernetesVersion(t *testing.T) {
	cfg, err := newBuildConfig([]BuildOption{WithKubernetesVersion("v1.36.3")})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.kubernetesVersion != "v1.36.3" {
		t.Errorf("kubernetesVersion = %q", cfg.kubernetesVersion)
	}
	_, err = newBuildConfig([]BuildOption{WithKubernetesVersion("1.36")})
	if err == nil || !strings.Contains(err.Error(), `WithKubernetesVersion: version "1.36" is not`) {
		t.Errorf("bad version: got %v", err)
	}
}

func TestReaperRef(t *testing.T) {
	_, tag, _ := strings.Cut(ReaperImage, ":")
	for node, want := range map[string]string{
		"registry.example.com/team/kindtest/node:v1.37.2": "registry.example.com/team/kindtest/reaper:" + tag,
		"127.0.0.1:5000/kindtest/node":                    "127.0.0.1:5000/kindtest/reaper:" + tag,
		"ghcr.io/o/node@sha256:abcd":                      "ghcr.io/o/reaper:" + tag,
	} {
		if got := ReaperRef(node); got != want {
			t.Errorf("ReaperRef(%q) = %q, want %q", node, got, want)
		}
	}
}

func TestServedReleases(t *testing.T) {
	served := []string{"v1.9.0", "v1.34.0", "v1.34.4", "v1.34.2", "v1.35.4", "v1.36.1", "v1.36.3", "v1.37.2", "v1.38.0-alpha.1", "v0.4.0"}
	got := servedReleases(served)
	want := "the newest releases it serves are v1.37.2, v1.36.3, v1.35.4, v1.34.4 (one per minor)"
	if !strings.HasPrefix(got, want) {
		t.Errorf("servedReleases:\n got %s\nwant %s...", got, want)
	}
	if got := servedReleases([]string{"v0.1.0"}); !strings.Contains(got, "no release") {
		t.Errorf("no releases: %s", got)
	}
}
