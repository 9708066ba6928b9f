package kindtest

import (
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/docker"
)

func TestCheckPlatform(t *testing.T) {
	for _, tc := range []struct {
		image, engine string
		refused       bool
	}{
		{"linux/amd64", "x86_64", false},
		{"linux/arm64", "aarch64", false},
		{"linux/arm64/v8", "aarch64", false},
		{"linux/arm64", "arm64", false},
		{"linux/arm64", "x86_64", true},
		{"linux/amd64", "aarch64", true},
		{"windows/amd64", "x86_64", true},
		{"linux/arm/v7", "armv7l", false},
		{"linux/arm", "armv7l", false},
		{"linux/arm/v6", "armv7l", true},
		{"linux/mips64le", "mips64", false}, // an engine architecture kindtest cannot name
	} {
		err := checkPlatform(docker.Image{Platform: tc.image}, docker.EngineInfo{Architecture: tc.engine}, "example.com/node:v1", "unix:///var/run/docker.sock")
		if (err != nil) != tc.refused {
			t.Errorf("image %s on an engine of %s: %v, want refused %v", tc.image, tc.engine, err, tc.refused)
			continue
		}
		if err != nil {
			for _, want := range []string{"example.com/node:v1", "is for " + tc.image, "unix:///var/run/docker.sock", "(" + tc.engine + ")", "emulation", "made for linux/"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("image %s on an engine of %s: %q, want it to say %q", tc.image, tc.engine, err, want)
				}
			}
		}
	}
}
