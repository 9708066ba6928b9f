// Package timeout runs into go test's -timeout with a cluster up (see
// TestTestTimeout).
package timeout

import (
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

func TestRunsIntoTimeout(t *testing.T) {
	c := kindtest.Start(t, kindtest.WithoutKubernetes())
	t.Logf("TIMEOUT cluster=%s", c.Name())
	time.Sleep(time.Hour)
}
