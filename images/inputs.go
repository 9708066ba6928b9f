package images

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The node image's inputs travel inside the library's own module, so that
// a user who only has the module (`go get`, the module cache) can build
// the image. Module zips leave out the nested modules (kubernetes/,
// containerd/, etcd/, coredns/, pause/, local-path-provisioner/,
// network-policies/), since each is a module of its own,
// and go:embed cannot reach into them either: nested.txtar holds a copy of
// their files, which TestNestedArchive keeps equal to them. Regenerate it
// with `go test ./images -run TestNestedArchive -update`.
//
//go:embed *.go base kube-proxy node nested.txtar
var embeddedInputs embed.FS

// nestedArchive is the name of the archive of the nested modules' files.
const nestedArchive = "nested.txtar"

// executableInputs are the inputs that are executable in a checkout; an
// embedded file carries no mode.
var executableInputs = map[string]bool{"node/entrypoint": true}

// inputFile is one input of the node image, as a checkout holds it.
type inputFile struct {
	// rel is the slash-separated path under images/.
	rel  string
	data []byte
}

// embeddedInputFiles returns the inputs carried in the library: the
// embedded files that are inputs, and the nested modules' files unpacked
// from nestedArchive, sorted by path.
func embeddedInputFiles() ([]inputFile, error) {
	var files []inputFile
	err := fs.WalkDir(embeddedInputs, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isInput(p) {
			return err
		}
		data, err := embeddedInputs.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, inputFile{rel: p, data: data})
		if p == nestedArchive {
			nested, err := parseTxtar(data)
			if err != nil {
				return fmt.Errorf("%s: %w", nestedArchive, err)
			}
			files = append(files, nested...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("embedded node image inputs: %w", err)
	}
	slices.SortFunc(files, func(a, b inputFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

// writeEmbeddedInputs writes the embedded inputs, laid out as the images/
// directory of a checkout, under cacheDir/source/<hash of the inputs>/images
// and returns that directory. Written once per set of inputs: a finished
// directory is only ever renamed into place, so concurrent builds and
// interrupted writes leave nothing half-written behind that name.
func writeEmbeddedInputs(cacheDir string) (string, error) {
	files, err := embeddedInputFiles()
	if err != nil {
		return "", err
	}
	recipe := make([]string, 0, 2*len(files))
	for _, f := range files {
		recipe = append(recipe, f.rel, string(f.data))
	}
	final := filepath.Join(cacheDir, "source", hashStrings(recipe...)[:hashLength])
	err = writeDirOnce(final, func(tmp string) error {
		for _, f := range files {
			p := filepath.Join(tmp, "images", filepath.FromSlash(f.rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if executableInputs[f.rel] {
				mode = 0o755
			}
			if err := os.WriteFile(p, f.data, mode); err != nil {
				return err
			}
			// WriteFile's mode is filtered by the umask; the hash sees the bit.
			if err := os.Chmod(p, mode); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("write node image inputs: %w", err)
	}
	return filepath.Join(final, "images"), nil
}

// writeDirOnce makes the directory final unless it exists: fill writes
// its content into a new directory beside it, which is then renamed to
// final. A finished directory is only ever renamed into place, so
// concurrent writers and interrupted ones leave nothing half-written
// under that name; a writer that loses the race to another one finds
// final made and uses it.
func writeDirOnce(final string, fill func(tmp string) error) error {
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return nil // another writer made it first
		}
		return err
	}
	return nil
}

// parseTxtar reads a txtar archive: a comment, then files, each starting
// with a line "-- name --". Every file's content ends with a newline.
func parseTxtar(data []byte) ([]inputFile, error) {
	var files []inputFile
	var cur *inputFile
	for line := range strings.Lines(string(data)) {
		if name, ok := txtarMarker(line); ok {
			if !fs.ValidPath(name) || strings.Contains(name, "\\") {
				return nil, fmt.Errorf("bad file name %q", name)
			}
			files = append(files, inputFile{rel: name})
			cur = &files[len(files)-1]
			continue
		}
		if cur != nil {
			cur.data = append(cur.data, line...)
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no files")
	}
	return files, nil
}

// txtarMarker returns the file name of a txtar file marker line.
func txtarMarker(line string) (string, bool) {
	line = strings.TrimSuffix(line, "\n")
	if !strings.HasPrefix(line, "-- ") || !strings.HasSuffix(line, " --") || len(line) < len("-- x --") {
		return "", false
	}
	return strings.TrimSpace(line[3 : len(line)-3]), true
}
