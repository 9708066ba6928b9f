package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/flock"
)

// builder holds the state of one cold build.
type builder struct {
	cfg    *buildConfig
	cli    *docker.Client
	res    Result
	binDir string
	// deriveKubernetes is set when the version to build is not the one
	// the checked-in images/kubernetes module requires.
	deriveKubernetes bool
	// components are the images kubeadm expects, as it names them.
	components []string
}

func (b *builder) run(ctx context.Context) error {
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"build binaries (go build)", b.buildBinaries},
		{"base images (mmdebstrap)", b.baseImages},
		{"component images", b.componentImages},
		{"node image", b.nodeImage},
		{"preload component images into containerd", b.preload},
	}
	for i, s := range steps {
		start := time.Now()
		b.cfg.logger.Printf("node image step %d/%d: %s", i+1, len(steps), s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		b.cfg.logger.Printf("node image step %d/%d: %s done in %s", i+1, len(steps), s.name, time.Since(start).Round(100*time.Millisecond))
	}
	if err := b.cli.TagImage(ctx, b.res.ContentImage, b.res.Image); err != nil {
		return err
	}
	// The committed image keeps the intermediate's layers; only the name goes.
	if err := b.cli.RemoveImage(ctx, b.buildRef()); err != nil {
		return err
	}
	return b.pruneOlderImages(ctx)
}

// pruneOlderImages removes the node images of the same Kubernetes version
// built from other inputs, so that rebuilds do not fill the disk. One that
// a container still uses stays.
func (b *builder) pruneOlderImages(ctx context.Context) error {
	refs, err := b.cli.ListImageTags(ctx, "kindtest/node")
	if err != nil {
		return err
	}
	prefix := "kindtest/node:" + b.res.KubernetesVersion + "-"
	for _, ref := range refs {
		if !strings.HasPrefix(ref, prefix) || ref == b.res.ContentImage {
			continue
		}
		switch err := b.cli.RemoveImage(ctx, ref); {
		case docker.IsConflict(err):
			b.cfg.logger.Printf("  kept older node image %s: in use", ref)
		case err != nil:
			return err
		default:
			b.cfg.logger.Printf("  removed older node image %s", ref)
		}
	}
	return nil
}

// command runs a program and returns an error that keeps the command and the
// tail of its output when it fails.
func command(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out tailBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s (in %s): %w\n%s", name, strings.Join(args, " "), dir, err, out.String())
	}
	return nil
}

// progressInterval is how often a long go build says how far it is.
var progressInterval = 10 * time.Second

// goBuild runs `go build -v` (args after "build") and, while it runs,
// logs every progressInterval how long it has taken, how many packages it
// has compiled (-v names each one it compiles; cached ones are not
// compiled again) and the last one; then what it built and in how long.
func goBuild(ctx context.Context, logger Logger, what, dir string, args ...string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-v"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), goEnv...)
	var out tailBuffer
	cmd.Stdout = &out
	lines := &lineCounter{w: &out}
	cmd.Stderr = lines
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go build %s (in %s): %w", what, dir, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ticker := time.NewTicker(progressInterval)
	defer ticker.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("go build %s (in %s): %w\n%s", what, dir, err, out.String())
			}
			n, _ := lines.state()
			logger.Printf("  built %s in %s (%d packages compiled, the rest from the Go build cache)", what, time.Since(start).Round(100*time.Millisecond), n)
			return nil
		case <-ticker.C:
			n, last := lines.state()
			logger.Printf("  building %s: %s, %d packages compiled so far, last %s", what, time.Since(start).Round(time.Second), n, last)
		}
	}
}

// lineCounter passes output on and counts its lines, keeping the last.
type lineCounter struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	n       int
	last    string
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.partial[:i])); line != "" {
			l.n++
			l.last = line
		}
		l.partial = l.partial[i+1:]
	}
	return l.w.Write(p)
}

func (l *lineCounter) state() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.last
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct{ buf []byte }

const tailLimit = 8 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailLimit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailLimit:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

// moduleVersion returns the version at which the go.mod file at path
// requires module.
func moduleVersion(path, module string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, module)
}

// lockFile takes an exclusive lock on path, waiting (and saying so) while
// another build holds it, and returns the function that releases it.
func lockFile(ctx context.Context, path string, logger Logger) (func(), error) {
	l, err := flock.Wait(ctx, path, func() {
		logger.Printf("waiting for another node image build to finish (lock %s)", path)
	})
	if err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}

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
