package reaper

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/poll"
)

// ReplyTimeout bounds the reaper's answer to one request.
const ReplyTimeout = 10 * time.Second

// greetingTimeout bounds the wait for the greeting on one connection. An
// engine's port proxy that has nothing behind it yet closes the
// connection at once, so the wait is long only where the path to the
// reaper is slow (rootless podman's port forwarder under emulation took
// longer than a second).
const greetingTimeout = 5 * time.Second

// Client is one connection of a test process to a reaper, the other side
// of Serve's protocol. Its own goroutine reads the reaper's answers, so
// that a connection that ends is noticed at once (see Done), not at the
// next request. The process keeps it open for its whole life: the reaper
// removes what was registered on it once it closes, so it is never
// closed, even when lost (closing it would make a reaper that is only
// slow remove the process's live clusters). Session keeps a process's
// clusters registered across the loss of one.
type Client struct {
	conn    net.Conn
	replies chan string
	timeout time.Duration

	mu sync.Mutex // one request at a time

	lostOnce sync.Once
	done     chan struct{} // closed once lost
	err      error         // why, once done is closed
}

// StaleError says the reaper speaks another protocol version: its image
// is older or newer than the client.
type StaleError struct{ Greeting string }

func (e *StaleError) Error() string {
	return fmt.Sprintf("the reaper answered %q, this client needs %q", e.Greeting, Greeting)
}

// Dial connects to the reaper listening at addr, trying again until ctx
// ends: an engine's port proxy accepts before the reaper listens, so only
// the reaper's greeting proves the connection reached it. gone says
// whether the reaper's container has stopped, which ends the attempts. A
// reaper that greets with another version is a *StaleError at once.
func Dial(ctx context.Context, addr string, gone func() bool) (*Client, error) {
	var c *Client
	var last error
	err := poll.Until(ctx, 10*time.Millisecond, 200*time.Millisecond, func() (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			last = err
			if gone() {
				return false, fmt.Errorf("reaper exited: %v", last)
			}
			return false, nil
		}
		deadline := time.Now().Add(greetingTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = conn.SetReadDeadline(deadline)
		r := bufio.NewReader(conn)
		line, err := r.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil || line != Greeting {
			conn.Close()
			if err == nil && strings.HasPrefix(line, "kindtest-reaper") {
				return false, &StaleError{Greeting: line}
			}
			last = fmt.Errorf("greeting %q: %v", line, err)
			// A reaper that refuses new clients is exiting.
			if gone() {
				return false, fmt.Errorf("reaper exited: %v", last)
			}
			return false, nil
		}
		_ = conn.SetReadDeadline(time.Time{})
		c = newClient(conn, r, ReplyTimeout)
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last attempt: %v)", err, last)
		}
		return nil, fmt.Errorf("connect to reaper at %s: %w", addr, err)
	}
	return c, nil
}

// newClient starts reading conn's answers from r, what followed the
// greeting.
func newClient(conn net.Conn, r *bufio.Reader, timeout time.Duration) *Client {
	c := &Client{conn: conn, replies: make(chan string, 1), timeout: timeout, done: make(chan struct{})}
	go c.read(r)
	return c
}

// Hello names the client's session; it comes first. Said again with the
// same session, it changes nothing and is answered ok: Session's
// heartbeat.
func (c *Client) Hello(session string) error { return c.request("hello", session) }

// Register tells the reaper that this process owns the cluster, before
// any of it exists.
func (c *Client) Register(cluster string) error { return c.request("register", cluster) }

// Forget tells the reaper that the cluster is no longer its business:
// removed, or kept on purpose.
func (c *Client) Forget(cluster string) error { return c.request("forget", cluster) }

// Abandon closes a connection that never said hello, which registered
// nothing: for a client that gives up on it right away.
func (c *Client) Abandon() { c.conn.Close() }

// Done is closed once the connection is lost: the reaper ended it (it was
// killed, or exited), or a request on it failed or had no answer in
// time. A lost connection takes no more requests; Err says why it was
// lost.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection was lost, nil while it is not.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

func (c *Client) lose(err error) {
	c.lostOnce.Do(func() {
		c.err = fmt.Errorf("reaper connection: %w", err)
		close(c.done)
	})
}

// read delivers the connection's answers until reading fails, then
// reports the connection lost.
func (c *Client) read(r *bufio.Reader) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			c.lose(err)
			return
		}
		select {
		case c.replies <- strings.TrimSpace(line):
		default: // an answer no request waits for any more
		}
	}
}

func (c *Client) request(verb, name string) error {
	if verb != "hello" {
		if err := lifetime.CheckClusterName(name); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := fmt.Fprintf(c.conn, "%s %s\n", verb, name); err != nil {
		c.lose(err)
		return c.err
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	var line string
	select {
	case line = <-c.replies:
	case <-c.done:
		return c.err
	case <-t.C:
		// An answer that comes later would be taken for the next
		// request's: the connection is given up on.
		c.lose(fmt.Errorf("no answer to %s %s within %v", verb, name, c.timeout))
		return c.err
	}
	if line != "ok" {
		return fmt.Errorf("reaper refused %s %s: %s", verb, name, line)
	}
	return nil
}
