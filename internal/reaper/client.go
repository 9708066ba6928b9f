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

// Client is a test process's connection to the reaper, the other side of
// Serve's protocol. The process keeps it open for its whole life: the
// reaper removes what was registered on it once it closes, so it is never
// closed, even when broken (closing it would make a reaper that is only
// slow remove the process's live clusters).
type Client struct {
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	broken error
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
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
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
		c = &Client{conn: conn, r: r}
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

// Hello names the client's session; it comes first.
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

func (c *Client) request(verb, name string) error {
	if verb != "hello" {
		if err := lifetime.CheckClusterName(name); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	_ = c.conn.SetDeadline(time.Now().Add(ReplyTimeout))
	defer c.conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c.conn, "%s %s\n", verb, name); err != nil {
		c.broken = fmt.Errorf("reaper connection: %w", err)
		return c.broken
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.broken = fmt.Errorf("reaper connection: %w", err)
		return c.broken
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return fmt.Errorf("reaper refused %s %s: %s", verb, name, line)
	}
	return nil
}
