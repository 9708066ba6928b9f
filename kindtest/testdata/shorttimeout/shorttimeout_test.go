// Package shorttimeout starts a cluster under a go test -timeout that
// leaves no time for one (see TestShortTestTimeout).
package shorttimeout

import (
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestStartUnderShortTimeout(t *testing.T) {
	kindtest.Start(t)
	t.Log("SHORTTIMEOUT: Start returned a cluster")
}
