package images

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/flock"
)

// Running the programs a build needs (go build, mmdebstrap) with their
// output kept for errors and progress, and reading go.mod requirements.

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

// goBuild runs `go build -v` (args after "build"), with env added to
// goEnv (GOARCH for another target), and, while it runs,
// logs every progressInterval how long it has taken, how many packages it
// has compiled (-v names each one it compiles; cached ones are not
// compiled again) and the last one; then what it built and in how long.
func goBuild(ctx context.Context, logger Logger, what, dir string, env []string, args ...string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-v"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), goEnv...), env...)
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

// closeFunc is a reader whose Close runs close: a root file system's
// stream that removes what it is read from (a temporary file, a builder
// container) when it is closed.
type closeFunc struct {
	io.Reader
	close func() error
}

func (c *closeFunc) Close() error { return c.close() }

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
