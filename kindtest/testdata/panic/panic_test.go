// Package panic panics in a test body with a cluster up (see
// TestPanickingTest).
package panic

import (
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestPanicsWithACluster(t *testing.T) {
	c := kindtest.Start(t, kindtest.WithoutKubernetes())
	t.Logf("PANIC cluster=%s", c.Name())
	panic("the test body panics")
}
