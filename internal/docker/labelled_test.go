package docker

import (
	"context"
	"testing"
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
