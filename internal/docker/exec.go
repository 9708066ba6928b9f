package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/kindtest/kindtest/internal/poll"
)

// ExecOptions are the streams and environment of an exec. Nil writers
// discard; a nil Stdin attaches no standard input. Exec returns only once
// it has stopped using the streams; like os/exec, it waits for a Read of
// Stdin in progress to return.
type ExecOptions struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    []string
	User   string
	Dir    string
}

// Exec runs cmd in a running container and returns its exit code once the
// command has ended and its output has been read to the end. Stdout and
// stderr are kept apart. An error means the command could not be run or
// followed; a non-zero exit code is not an error here.
func (c *Client) Exec(ctx context.Context, id string, cmd []string, opts ExecOptions) (int, error) {
	created, err := c.api.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd:          cmd,
		Env:          opts.Env,
		User:         opts.User,
		WorkingDir:   opts.Dir,
		AttachStdin:  opts.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, fmt.Errorf("exec in container %s: %w", id, err)
	}
	attached, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, fmt.Errorf("attach to exec in container %s: %w", id, err)
	}
	// Exec returns only once neither goroutine below touches the caller's
	// reader or writers any more, as os/exec's Wait does: on cancellation
	// the connection is closed, which ends both.
	var wg sync.WaitGroup
	defer func() {
		attached.Close()
		wg.Wait()
	}()

	if opts.Stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A failed write means the command stopped reading; its exit code
			// tells the rest.
			_, _ = io.Copy(attached.Conn, opts.Stdin)
			_ = attached.CloseWrite()
		}()
	}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	copied := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := stdcopy.StdCopy(stdout, stderr, attached.Reader)
		copied <- err
	}()
	select {
	case err := <-copied:
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("read exec output in container %s: %w", id, err)
		}
	case <-ctx.Done():
		return -1, ctx.Err()
	}

	// The stream ends a moment before the engine records the exit code.
	code, err := c.execExitCode(ctx, id, created.ID)
	if err != nil {
		return -1, err
	}
	return code, nil
}

// execExitCode waits until the engine has recorded the exit code of exec
// execID in container id, and returns it.
func (c *Client) execExitCode(ctx context.Context, id, execID string) (int, error) {
	code := -1
	err := poll.Until(ctx, time.Millisecond, 128*time.Millisecond, func() (bool, error) {
		info, err := c.api.ContainerExecInspect(ctx, execID)
		if err != nil {
			return false, fmt.Errorf("inspect exec in container %s: %w", id, err)
		}
		code = info.ExitCode
		return !info.Running, nil
	})
	return code, err
}

// ExecConn is a running exec whose standard input and output are one
// byte stream, as a network connection is: Write feeds the command's
// stdin, CloseWrite closes it (the command reads EOF), Read returns its
// stdout. Its stderr is kept (the last 4 KiB) for Wait.
type ExecConn struct {
	c        *Client
	id       string // container
	execID   string
	attached types.HijackedResponse
	stdout   *io.PipeReader
	stderr   tailBuffer
	demuxed  chan struct{} // closed once the output stream has ended
	demuxErr error
	close    sync.Once
}

// DialExec starts cmd in a running container with its stdin and stdout
// attached as a stream. The caller must Close it.
func (c *Client) DialExec(ctx context.Context, id string, cmd []string) (*ExecConn, error) {
	created, err := c.api.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd: cmd, AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("exec in container %s: %w", id, err)
	}
	attached, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach to exec in container %s: %w", id, err)
	}
	r, w := io.Pipe()
	e := &ExecConn{c: c, id: id, execID: created.ID, attached: attached, stdout: r, demuxed: make(chan struct{})}
	e.stderr.max = 4 << 10
	go func() {
		defer close(e.demuxed)
		_, err := stdcopy.StdCopy(w, &e.stderr, attached.Reader)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		e.demuxErr = err
		w.CloseWithError(err) // nil: readers see EOF
	}()
	return e, nil
}

// Read reads the command's stdout.
func (e *ExecConn) Read(p []byte) (int, error) { return e.stdout.Read(p) }

// Write writes to the command's stdin.
func (e *ExecConn) Write(p []byte) (int, error) { return e.attached.Conn.Write(p) }

// CloseWrite closes the command's stdin; its stdout stays readable.
func (e *ExecConn) CloseWrite() error { return e.attached.CloseWrite() }

// Close ends the stream in both directions. The command itself is not
// signalled: it sees its stdin close and its output go nowhere.
func (e *ExecConn) Close() error {
	e.close.Do(func() {
		e.attached.Close()
		e.stdout.Close()
	})
	return nil
}

// Wait waits until the command's output has ended, then returns its exit
// code and the tail of its stderr.
func (e *ExecConn) Wait(ctx context.Context) (int, string, error) {
	select {
	case <-e.demuxed:
	case <-ctx.Done():
		return -1, e.stderr.String(), ctx.Err()
	}
	if e.demuxErr != nil {
		return -1, e.stderr.String(), fmt.Errorf("read exec output in container %s: %w", e.id, e.demuxErr)
	}
	code, err := e.c.execExitCode(ctx, e.id, e.execID)
	if err != nil {
		return -1, e.stderr.String(), err
	}
	return code, e.stderr.String(), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
