package kindtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  kindtest.Option
		want string
	}{
		{"negative workers", kindtest.WithWorkers(-1), "negative"},
		{"absurd workers", kindtest.WithWorkers(500), "at most 16"},
		{"prefix characters", kindtest.WithNamePrefix("My_Tests"), "lowercase letters"},
		{"prefix length", kindtest.WithNamePrefix(strings.Repeat("a", 40)), "at most 20"},
		{"prefix ends with dash", kindtest.WithNamePrefix("kt-"), "not ending with '-'"},
		{"empty image", kindtest.WithImage(""), "image: empty"},
		{"nil logger", kindtest.WithLogger(nil), "logger: nil"},
		{"zero timeout", kindtest.WithCreateTimeout(0), "must be positive"},
		{"bad keep", kindtest.WithKeep(kindtest.KeepPolicy(9)), "keep policy"},
		{"port mapping of the API server", kindtest.WithPortMapping(0, 6443), "the API server's"},
		{"port mapping out of range", kindtest.WithPortMapping(0, 70000), "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Options are checked before the engine is asked anything, so
			// this needs no engine.
			t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
			_, err := kindtest.New(context.Background(), tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if errors.Is(err, kindtest.ErrDockerUnavailable) {
				t.Errorf("bad options reported as a missing engine: %v", err)
			}
		})
	}
	t.Run("several at once", func(t *testing.T) {
		_, err := kindtest.New(context.Background(), kindtest.WithWorkers(-2), kindtest.WithNamePrefix("X"))
		if err == nil || !strings.Contains(err.Error(), "negative") || !strings.Contains(err.Error(), "prefix") {
			t.Fatalf("got %v, want both problems reported", err)
		}
	})
	t.Run("KINDTEST_KEEP", func(t *testing.T) {
		t.Setenv("KINDTEST_KEEP", "sometimes")
		_, err := kindtest.New(context.Background())
		if err == nil || !strings.Contains(err.Error(), "KINDTEST_KEEP") {
			t.Fatalf("got %v, want an error naming KINDTEST_KEEP", err)
		}
	})
}

func TestNoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := kindtest.New(context.Background())
	if !errors.Is(err, kindtest.ErrDockerUnavailable) {
		t.Fatalf("got %v, want ErrDockerUnavailable", err)
	}
	if !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Errorf("error %q does not say what to do", err)
	}
}
