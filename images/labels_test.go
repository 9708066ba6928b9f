package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// TestNodeDockerfileLabels: the node image's Dockerfile writes its label
// keys as text; they must be the keys the library reads.
func TestNodeDockerfileLabels(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("node", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{lifetime.LabelImageKubernetesVersion, lifetime.LabelImageContentHash, lifetime.LabelImageKubernetesPatches} {
		if !strings.Contains(string(data), "\n"+"LABEL "+k+"=") && !strings.Contains(string(data), " "+k+"=") {
			t.Errorf("node/Dockerfile does not set the label %s", k)
		}
	}
}
