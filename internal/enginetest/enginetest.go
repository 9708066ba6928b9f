// Package enginetest gives tests a client for the real Docker engine, with
// the project's rule for when there is none: skip with a message, except
// when the CI environment variable is set, where that is a failure.
package enginetest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// Client returns a client of the engine named by the environment, closed
// when the test ends.
// Under -short every engine test is skipped, engine or not: -short runs
// the unit tests alone.
func Client(t testing.TB) *docker.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("engine test: skipped under -short (run without -short to test against the engine)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	dc, err := docker.New(ctx)
	if errors.Is(err, docker.ErrUnavailable) && os.Getenv("CI") == "" {
		t.Skipf("needs a Docker engine (set CI=true to make this a failure): %v", err)
	}
	if err != nil {
		t.Fatalf("needs a Docker engine: %v", err)
	}
	t.Cleanup(func() { dc.Close() })
	return dc
}
