package kindtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// maxErrorOutput caps the stdout and stderr an ExitError keeps.
const maxErrorOutput = 4 << 10

// ExecResult is what a finished command left behind.
type ExecResult struct {
	Stdout   string
	Stderr   string
	ExitCode int
}

// ExitError reports a command that ran and exited non-zero. Stdout and
// Stderr hold at most the last 4 KiB of each.
type ExitError struct {
	Node     string
	Cmd      []string
	ExitCode int
	Stdout   string
	Stderr   string
}

// Error names the node, the command, the exit code and the output tail.
func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: %s: exit code %d", e.Node, quoteCmd(e.Cmd), e.ExitCode)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		fmt.Fprintf(&b, "\nstderr:\n%s", s)
	}
	if s := strings.TrimSpace(e.Stdout); s != "" {
		fmt.Fprintf(&b, "\nstdout:\n%s", s)
	}
	return b.String()
}

// tail keeps the last n bytes of s, marking the cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[...]" + s[len(s)-n:]
}

func quoteCmd(cmd []string) string {
	q := make([]string, len(cmd))
	for i, a := range cmd {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$;&|<>()*?\\") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// Exec runs cmd on the node and returns its output. A command that exits
// non-zero returns its result and an *ExitError.
func (n *Node) Exec(ctx context.Context, cmd ...string) (ExecResult, error) {
	return n.ExecInput(ctx, nil, cmd...)
}

// ExecInput is Exec with stdin fed to the command; nil means no input.
func (n *Node) ExecInput(ctx context.Context, stdin io.Reader, cmd ...string) (ExecResult, error) {
	var stdout, stderr bytes.Buffer
	err := n.ExecStream(ctx, stdin, &stdout, &stderr, cmd...)
	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	if ee, ok := err.(*ExitError); ok {
		res.ExitCode = ee.ExitCode
		ee.Stdout, ee.Stderr = tail(res.Stdout, maxErrorOutput), tail(res.Stderr, maxErrorOutput)
	}
	return res, err
}

// ExecStream runs cmd on the node with the given streams; nil writers
// discard. A non-zero exit is an *ExitError (without output: the caller has
// it).
func (n *Node) ExecStream(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, cmd ...string) error {
	if len(cmd) == 0 {
		return fmt.Errorf("node %s: exec: empty command", n.name)
	}
	code, err := n.docker.Exec(ctx, n.id, cmd, docker.ExecOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		if docker.IsConflict(err) || docker.IsNotFound(err) {
			return fmt.Errorf("node %s: %s: the node container %s: %w", n.name, quoteCmd(cmd), n.state(ctx), err)
		}
		return fmt.Errorf("node %s: %s: %w", n.name, quoteCmd(cmd), err)
	}
	if code != 0 {
		return &ExitError{Node: n.name, Cmd: cmd, ExitCode: code}
	}
	return nil
}

// state says what became of a node container that cannot run commands.
func (n *Node) state(ctx context.Context) string {
	info, err := n.docker.InspectContainer(ctx, n.id)
	switch {
	case docker.IsNotFound(err):
		return "is gone (removed)"
	case err != nil:
		return fmt.Sprintf("cannot be inspected (%v)", err)
	case !info.Running:
		return fmt.Sprintf("is %s (exit code %d)", info.Status, info.ExitCode)
	}
	return "is running"
}

// run is the internal form: it runs a command and returns its stdout; a
// failure's output is in the *ExitError.
func (n *Node) run(ctx context.Context, cmd ...string) (string, error) {
	res, err := n.Exec(ctx, cmd...)
	return res.Stdout, err
}

// sh runs a shell script on the node.
func (n *Node) sh(ctx context.Context, script string) (string, error) {
	return n.run(ctx, "sh", "-c", script)
}
