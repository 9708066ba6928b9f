package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
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
	delay := time.Millisecond
	for {
		info, err := c.api.ContainerExecInspect(ctx, created.ID)
		if err != nil {
			return -1, fmt.Errorf("inspect exec in container %s: %w", id, err)
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return -1, ctx.Err()
		}
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}
