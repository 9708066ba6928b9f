// Package b is one of three packages that 'go test -p 3' runs at once, each
// with a cluster of its own (see TestParallelPackages).
package b

import (
	"testing"

	"github.com/kindtest/kindtest/kindtest/testdata/parallel/shared"
)

func TestCluster(t *testing.T) { shared.Check(t) }
