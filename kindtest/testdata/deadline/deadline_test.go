// Package deadline starts a cluster that cannot be ready before go test's
// -timeout (see TestDeadlineNamedInError).
package deadline

import (
	"testing"

	"github.com/kindtest/kindtest/kindtest"
)

func TestCreationRunsIntoDeadline(t *testing.T) {
	kindtest.Start(t)
	t.Log("DEADLINE: the cluster was ready, which it should not have been")
}
