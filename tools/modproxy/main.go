// Command modproxy writes a file-based Go module proxy (GOPROXY=file://DIR)
// that serves one module, made from a directory by the rules the Go module
// proxy uses (golang.org/x/mod/zip): nested modules, vendor directories and
// version control directories are left out. kindtest's tests use it to get
// kindtest the way its users do.
//
//	modproxy -dir REPO -module PATH -version VERSION -out DIR
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", "", "the module's root directory")
	modPath := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version to serve it as")
	out := flag.String("out", "", "the proxy directory to write")
	flag.Parse()
	if err := run(*dir, *modPath, *version, *out); err != nil {
		fmt.Fprintf(os.Stderr, "modproxy: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, modPath, version, out string) error {
	if dir == "" || modPath == "" || version == "" || out == "" {
		return errors.New("-dir, -module, -version and -out are all required")
	}
	mv := module.Version{Path: modPath, Version: version}
	if err := module.Check(modPath, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(modPath)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	var zipped bytes.Buffer
	if err := zip.CreateFromDir(&zipped, mv, dir); err != nil {
		return fmt.Errorf("zip %s: %w", dir, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		version + ".mod":  goMod,
		version + ".zip":  zipped.Bytes(),
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s@%s: %d bytes zipped\n", modPath, version, zipped.Len())
	return nil
}
