package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
)

// Docker build contexts, streamed as tar archives from files on disk and
// bytes.

// tarFile is one entry of a build context: a file on disk or bytes.
type tarFile struct {
	name string
	path string
	data []byte
	mode int64
}

// contextTar streams files as a tar archive.
func contextTar(files []tarFile) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeTar(pw, files))
	}()
	return pr
}

func writeTar(w io.Writer, files []tarFile) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		if f.path == "" {
			hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
			continue
		}
		if err := writeTarFile(tw, f); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeTarFile(tw *tar.Writer, f tarFile) error {
	src, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	mode := int64(info.Mode().Perm())
	if f.mode != 0 {
		mode = f.mode
	}
	if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: mode, Size: info.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

// dirFiles lists the regular files directly in dir as context entries
// under prefix.
func dirFiles(dir, prefix string) ([]tarFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []tarFile
	for _, e := range entries {
		if e.Type().IsRegular() {
			files = append(files, tarFile{name: prefix + e.Name(), path: filepath.Join(dir, e.Name())})
		}
	}
	return files, nil
}
