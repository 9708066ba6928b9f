package enginetest

import (
	"strings"
	"testing"
)

func TestLastRelease(t *testing.T) {
	const yaml = "---\nbuildkit:\n  last: \"0.33.0\"\ndocker:\n  last: \"29.8.0\"\n  next: \"29.8.1\"\n"
	got, err := lastRelease(strings.NewReader(yaml))
	if err != nil || got != "29.8.0" {
		t.Errorf("lastRelease = %q, %v; want 29.8.0", got, err)
	}
	if _, err := lastRelease(strings.NewReader("---\nbuildkit:\n  last: \"0.33.0\"\n")); err == nil {
		t.Error("lastRelease of a file without a docker section: no error")
	}
}

func TestUnknownRelease(t *testing.T) {
	_, err := Release("docker27").recipe()
	if err == nil || !strings.Contains(err.Error(), "enginetest.Docker29") || !strings.Contains(err.Error(), "enginetest.Podman4") {
		t.Errorf("recipe of an unknown release: %v, want an error naming the known ones", err)
	}
}
