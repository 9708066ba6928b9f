package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestNoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := New(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Fatalf("got %v, want ErrUnavailable saying what to do", err)
	}
}

func TestLabelFilter(t *testing.T) {
	f := labelFilter(map[string]string{"a": "1", "b": ""})
	got := f.Get("label")
	if len(got) != 2 || !(got[0] == "a=1" && got[1] == "b" || got[0] == "b" && got[1] == "a=1") {
		t.Errorf("filter %v", got)
	}
}
