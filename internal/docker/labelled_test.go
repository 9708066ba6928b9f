package docker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

func TestRemoveLabelledRefusesBroadSelectors(t *testing.T) {
	// Refused before the engine is asked anything: no client needed.
	c := &Client{}
	for _, sel := range []map[string]string{nil, {}, {"dev.kindtest.cluster": " "}, {"": "x"}, {"a": "b", "c": "\t"}} {
		if err := c.RemoveLabelled(context.Background(), sel); err == nil {
			t.Errorf("selector %v accepted", sel)
		}
	}
}

func TestRetryable(t *testing.T) {
	conflict := fmt.Errorf("remove container x: %w", cerrdefs.ErrConflict)
	forbidden := fmt.Errorf("remove network y: %w", cerrdefs.ErrPermissionDenied)
	other := errors.New("disk on fire")
	if !retryable(errors.Join(conflict, forbidden)) {
		t.Error("conflicts of removals in progress are to be retried")
	}
	if retryable(errors.Join(conflict, other)) || retryable(other) {
		t.Error("an unexplained failure is not to be retried")
	}
}
