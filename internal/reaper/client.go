package reaper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// Dial makes a connection to a reaper and reads its greeting: it returns
// the connection and the reader that holds what followed the greeting.
// It is how a Client reaches a reaper, the first time and after losing
// one: running, started or created.
type Dial func(ctx context.Context) (net.Conn, *bufio.Reader, error)

// ClientConfig sets how a Client talks to its reaper.
type ClientConfig struct {
	// ReplyTimeout is how long a request waits for its answer.
	ReplyTimeout time.Duration
	// Heartbeat is how often an idle connection is checked: a reaper that
	// is killed may leave a connection that says nothing, rather than one
	// that ends.
	Heartbeat time.Duration
	// Redial is the longest wait between two attempts at reaching a
	// reaper again; they start at a second and double.
	Redial time.Duration
	// Logf says, once each time, that the connection was lost and what
	// became of it.
	Logf func(format string, args ...any)
}

// Client is a test process's side of the protocol: one session with the
// reapers of an engine. It says hello with the session and registers the
// clusters the process is about to create, on one connection at a time.
// When that connection is lost (the reaper was killed, or stopped
// answering), it reaches a reaper again through Dial and registers every
// cluster it holds there, so that the process's clusters are still
// removed should it be killed later.
//
// A connection is never closed, not even one given up on: closing it
// would make a reaper that is only slow remove the process's live
// clusters. Those stay referenced for the life of the Client, which a
// process keeps for its own life.
type Client struct {
	dial    Dial
	session string
	cfg     ClientConfig

	mu        sync.Mutex
	cur       *clientConn     // nil while none is usable
	owned     map[string]bool // registered and not forgotten
	abandoned []*clientConn   // given up on, never closed
	redialing bool
	closed    chan struct{} // closed by Stop
}

// clientConn is one connection to a reaper, read by its own goroutine.
type clientConn struct {
	conn    net.Conn
	replies chan string
	lost    chan struct{} // closed when reading fails
	err     error         // why, once lost is closed
	reqMu   sync.Mutex    // one request at a time
}

// NewClient reaches a reaper through dial and says hello with session,
// within ctx. The error says why no reaper could be reached; then there
// is no Client.
func NewClient(ctx context.Context, dial Dial, session string, cfg ClientConfig) (*Client, error) {
	if cfg.ReplyTimeout <= 0 || cfg.Heartbeat <= 0 || cfg.Redial <= 0 {
		return nil, errors.New("reaper client: reply timeout, heartbeat and redial must be positive")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	c := &Client{dial: dial, session: session, cfg: cfg, owned: map[string]bool{}, closed: make(chan struct{})}
	// A reaper that greets and then fails the hello is exiting: the next
	// dial reaches its successor. A failed dial is final (it retries on
	// its own).
	for {
		cc, err := c.connect(ctx, nil)
		if err == nil {
			c.cur = cc
			break
		}
		var de *dialError
		if errors.As(err, &de) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	go c.heartbeat()
	return c, nil
}

// Register tells the reaper that this process owns cluster name, before
// any of it exists. The Client holds it from then on, and registers it
// again with the next reaper should this one be lost; the error says the
// current reaper has not heard of it (yet).
func (c *Client) Register(name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	c.mu.Lock()
	c.owned[name] = true
	c.mu.Unlock()
	return c.request("register", name)
}

// Forget tells the reaper that the cluster is no longer its business:
// removed, or kept on purpose.
func (c *Client) Forget(name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.owned, name)
	c.mu.Unlock()
	return c.request("forget", name)
}

// Stop ends the heartbeat and any attempt at reaching a reaper again, for
// tests; the connections stay open.
func (c *Client) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
}

// request sends one request on the current connection and waits for its
// answer. A connection that fails or does not answer in time is given
// up on, and a reaper is reached again in the background.
func (c *Client) request(verb, arg string) error {
	c.mu.Lock()
	cc := c.cur
	c.mu.Unlock()
	if cc == nil {
		return errors.New("reaper connection lost; reaching a reaper again")
	}
	line, err := cc.roundTrip(verb+" "+arg, c.cfg.ReplyTimeout)
	if err != nil {
		c.lose(cc, err)
		return fmt.Errorf("reaper connection: %w", err)
	}
	if line != "ok" {
		return fmt.Errorf("reaper refused %s %s: %s", verb, arg, line)
	}
	return nil
}

// roundTrip writes one request line and reads its answer.
func (cc *clientConn) roundTrip(req string, timeout time.Duration) (string, error) {
	cc.reqMu.Lock()
	defer cc.reqMu.Unlock()
	select {
	case <-cc.lost:
		return "", cc.err
	default:
	}
	_ = cc.conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(cc.conn, "%s\n", req); err != nil {
		return "", err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line := <-cc.replies:
		return line, nil
	case <-cc.lost:
		return "", cc.err
	case <-t.C:
		return "", fmt.Errorf("no answer to %q within %v", req, timeout)
	}
}

// read delivers the connection's answers until reading fails, then
// reports it lost.
func (c *Client) read(cc *clientConn, r *bufio.Reader) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			cc.err = err
			close(cc.lost)
			c.lose(cc, err)
			return
		}
		select {
		case cc.replies <- strings.TrimSpace(line):
		default: // an answer no request waits for any more
		}
	}
}

// connect dials a reaper, says hello and registers names on it.
func (c *Client) connect(ctx context.Context, names []string) (*clientConn, error) {
	conn, r, err := c.dial(ctx)
	if err != nil {
		return nil, &dialError{err}
	}
	_ = conn.SetReadDeadline(time.Time{})
	cc := &clientConn{conn: conn, replies: make(chan string, 1), lost: make(chan struct{})}
	go c.read(cc, r)
	for _, req := range append([]string{"hello " + c.session}, prefixed("register ", names)...) {
		line, err := cc.roundTrip(req, c.cfg.ReplyTimeout)
		if err == nil && line != "ok" {
			err = fmt.Errorf("reaper refused %s: %s", req, line)
		}
		if err != nil {
			c.mu.Lock()
			c.abandoned = append(c.abandoned, cc)
			c.mu.Unlock()
			return nil, fmt.Errorf("reaper connection: %w", err)
		}
	}
	return cc, nil
}

// dialError is a failed Dial, as connect returns it.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// lose gives up on connection cc, once, and starts reaching a reaper
// again unless that is under way.
func (c *Client) lose(cc *clientConn, why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != cc {
		return // given up on already
	}
	c.cur = nil
	c.abandoned = append(c.abandoned, cc)
	if !c.redialing {
		c.redialing = true
		go c.redial(why)
	}
}

// redial reaches a reaper again, with backoff, and registers every
// cluster the Client holds with it. It logs one line when it succeeds,
// and one when its first attempt fails.
func (c *Client) redial(why error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		c.mu.Lock()
		names := make([]string, 0, len(c.owned))
		for n := range c.owned {
			names = append(names, n)
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cc, err := c.connect(ctx, names)
		cancel()
		if err == nil {
			c.mu.Lock()
			// Registered or forgotten meanwhile: the new reaper hears of it.
			var fix []string
			for n := range c.owned {
				if !slices.Contains(names, n) {
					fix = append(fix, "register "+n)
				}
			}
			for _, n := range names {
				if !c.owned[n] {
					fix = append(fix, "forget "+n)
				}
			}
			c.cur = cc
			c.redialing = false
			c.mu.Unlock()
			for _, req := range fix {
				verb, name, _ := strings.Cut(req, " ")
				_ = c.request(verb, name)
			}
			c.cfg.Logf("the reaper connection was lost (%v); reached a reaper again (attempt %d) and registered %d cluster(s) with it", why, attempt, len(names))
			return
		}
		if attempt == 1 {
			c.cfg.Logf("the reaper connection was lost (%v) and no reaper answers yet (%v): trying again; should this process be killed meanwhile, the next Start or `kindtest prune` removes its clusters", why, err)
		}
		select {
		case <-c.closed:
			c.mu.Lock()
			c.redialing = false
			c.mu.Unlock()
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, c.cfg.Redial)
	}
}

// heartbeat checks the current connection at every heartbeat interval: a
// hello with the same session is answered ok.
func (c *Client) heartbeat() {
	t := time.NewTicker(c.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		c.mu.Lock()
		cc := c.cur
		c.mu.Unlock()
		if cc == nil {
			continue
		}
		if line, err := cc.roundTrip("hello "+c.session, c.cfg.ReplyTimeout); err != nil {
			c.lose(cc, err)
		} else if line != "ok" {
			c.lose(cc, fmt.Errorf("heartbeat answered %q", line))
		}
	}
}
