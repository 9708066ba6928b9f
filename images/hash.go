package images

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/internal/imageref"
)

// hashLength is how many hex digits of a content hash go into a tag.
const hashLength = 12

// notNodeImageInputs are files under images/ that build other images or
// no image at all (the feature gate list generator), so that changing them
// does not rebuild the node image. A name ending in "/" stands for a
// directory and everything below it.
var notNodeImageInputs = map[string]bool{
	"reaper.go":                       true,
	"kubernetes/featuregates/main.go": true,
	"registry.go":                     true,
	"registry.txtar":                  true,
	"registry/":                       true,
}

// isInput reports whether the file at rel (slash-separated, relative to
// the images/ directory) is an input of the node image: not a test,
// documentation, a hidden file or anything under a hidden or testdata
// directory, and not one of notNodeImageInputs. contentHash and the
// embedded copy of the inputs (see inputs.go) use the same rule.
func isInput(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, dir := range parts[:len(parts)-1] {
		if strings.HasPrefix(dir, ".") || dir == "testdata" {
			return false
		}
	}
	name := parts[len(parts)-1]
	return !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, "_test.go") &&
		!strings.HasSuffix(name, ".md") && !notNodeImageInputs[rel] && !notNodeImageInputs[parts[0]+"/"]
}

// contentHash hashes the inputs of the node image found under dir (the
// images/ directory of a checkout, or the inputs written out from the
// library's module) together with the flavour (the Kubernetes version,
// with StockSuffix for a build without the timing patches) and the target
// platform ("linux/amd64"): every regular
// file that isInput, by relative path, executable bit and content. The
// builder's own Go files are inputs too, since they hold build flags and
// the component Dockerfiles.
func contentHash(dir, flavour, platform string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if path != dir && d.IsDir() && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if isInput(filepath.ToSlash(rel)) {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash node image inputs: %w", err)
	}
	slices.Sort(files)
	h := sha256.New()
	fmt.Fprintf(h, "kubernetes %s\n", flavour)
	fmt.Fprintf(h, "platform %s\n", platform)
	// The component images' references are in internal/imageref, outside
	// the files hashed below, and the node image carries them.
	fmt.Fprintf(h, "components %s %s\n", imageref.LocalPathProvisioner, imageref.NetworkPolicies)
	for _, rel := range files {
		if err := hashFile(h, dir, rel); err != nil {
			return "", fmt.Errorf("hash node image inputs: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashStrings hashes a recipe given as strings, for images whose inputs
// are a few values rather than files.
func hashStrings(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashFile(h io.Writer, dir, rel string) error {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "file %q exec=%t size=%d\n", rel, info.Mode()&0o111 != 0, info.Size())
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	return nil
}
