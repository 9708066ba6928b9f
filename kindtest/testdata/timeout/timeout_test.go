// Package timeout runs into go test's -timeout with a cluster up (see
// TestTestTimeout).
package timeout

import (
	"fmt"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

func TestRunsIntoTimeout(t *testing.T) {
	c := kindtest.Start(t, kindtest.WithoutKubernetes())
	// On standard output: without -v, the test's log is lost in the
	// deadline panic.
	fmt.Printf("TIMEOUT cluster=%s\n", c.Name())
	time.Sleep(time.Hour)
}
