package reaper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/poll"
)

// Dialer reaches a reaper, running or started for the purpose, and
// returns a connection whose greeting was read (see Dial) and that has
// not said hello. It is how a Session reaches a reaper, the first time
// and after losing one; it bounds its own attempts, and gives up when ctx
// ends.
type Dialer func(ctx context.Context) (*Client, error)

// SessionConfig sets how a Session keeps its reaper.
type SessionConfig struct {
	// Heartbeat is how often the current connection is checked with a
	// repeated hello: a reaper that is killed or stuck may leave a
	// connection that says nothing, rather than one that ends.
	Heartbeat time.Duration
	// Redial is the longest wait between two attempts at reaching a
	// reaper again once one is lost; the waits start at a second (or
	// Redial, if shorter) and double.
	Redial time.Duration
	// Logf says, once for each loss, that the connection was lost and
	// what became of it.
	Logf func(format string, args ...any)
}

// Session is a test process's session with the reapers of an engine: it
// says hello with the process's session id and registers the clusters
// the process is about to create, on one connection at a time. When that
// connection is lost (the reaper was killed, exited, or stopped
// answering), it reaches a reaper again through its Dialer, in the
// background and with backoff, and registers there every cluster it
// holds, so that the process's clusters are still removed should it be
// killed later.
//
// No connection that said hello is ever closed, not even one given up on:
// closing it would make a reaper that is only slow remove the process's
// live clusters. Those connections stay referenced for the life of the
// Session, which a process keeps for its own life.
type Session struct {
	dial   Dialer
	id     string
	cfg    SessionConfig
	ctx    context.Context // ends with Stop
	cancel context.CancelFunc

	mu        sync.Mutex
	cur       *Client         // nil while none is usable
	owned     map[string]bool // registered and not forgotten
	held      []*Client       // every connection that said hello
	redialing bool
}

// errReaching is what a request gets while no reaper is reached.
var errReaching = errors.New("reaper connection lost; reaching a reaper again")

// NewSession reaches a reaper through dial and says hello with the
// session id, within ctx. A reaper reached that does not answer hello is
// left and reached again. The error says why no reaper could be reached;
// then there is no Session.
func NewSession(ctx context.Context, dial Dialer, id string, cfg SessionConfig) (*Session, error) {
	if cfg.Heartbeat <= 0 || cfg.Redial <= 0 {
		return nil, errors.New("reaper session: heartbeat and redial must be positive")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	var cc *Client
	var last error
	err := poll.Until(ctx, 50*time.Millisecond, time.Second, func() (bool, error) {
		c, err := dial(ctx)
		if err != nil {
			return false, err
		}
		if err := c.Hello(id); err != nil {
			c.Abandon()
			last = err
			return false, nil
		}
		cc = c
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last attempt: %v)", err, last)
		}
		return nil, err
	}
	s := &Session{dial: dial, id: id, cfg: cfg, owned: map[string]bool{}, cur: cc, held: []*Client{cc}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.follow(cc)
	go s.heartbeat()
	return s, nil
}

// Register tells the reaper that this process owns cluster name, before
// any of it exists. The Session holds it from then on, and registers it
// again with the next reaper should this one be lost; the error says the
// current reaper has not heard of it (yet).
func (s *Session) Register(name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	s.mu.Lock()
	s.owned[name] = true
	cc := s.cur
	s.mu.Unlock()
	if cc == nil {
		return errReaching
	}
	return cc.Register(name)
}

// Forget tells the reaper that the cluster is no longer its business:
// removed, or kept on purpose. The Session holds it no longer.
func (s *Session) Forget(name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.owned, name)
	cc := s.cur
	s.mu.Unlock()
	if cc == nil {
		return errReaching
	}
	return cc.Forget(name)
}

// Stop ends the heartbeat and any attempt at reaching a reaper again, for
// tests; the connections stay open.
func (s *Session) Stop() { s.cancel() }

// follow gives up on connection cc once it is lost.
func (s *Session) follow(cc *Client) {
	select {
	case <-cc.Done():
		s.lose(cc)
	case <-s.ctx.Done():
	}
}

// heartbeat says hello again on the current connection at every
// heartbeat: a connection that fails it, or has no answer in time, is
// lost (see follow).
func (s *Session) heartbeat() {
	t := time.NewTicker(s.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		cc := s.cur
		s.mu.Unlock()
		if cc != nil {
			_ = cc.Hello(s.id)
		}
	}
}

// lose gives up on connection cc, once, and starts reaching a reaper
// again unless that is under way.
func (s *Session) lose(cc *Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != cc {
		return
	}
	s.cur = nil
	if !s.redialing {
		s.redialing = true
		go s.redial(time.Now(), cc.Err())
	}
}

// redial reaches a reaper again, with backoff, until it has one that
// holds every cluster of the Session or Stop is called. It logs one line
// that says the connection was lost: when it has reached a reaper, or
// when its first attempt fails, and then one more once it has.
func (s *Session) redial(lost time.Time, why error) {
	wait := min(time.Second, s.cfg.Redial)
	for attempt := 1; ; attempt++ {
		n, err := s.reconnect()
		if err == nil {
			if attempt == 1 {
				s.cfg.Logf("the reaper connection was lost (%v); reached a reaper again and registered %d cluster(s) with it", why, n)
			} else {
				s.cfg.Logf("reached a reaper again (attempt %d, %v after the loss) and registered %d cluster(s) with it", attempt, time.Since(lost).Round(100*time.Millisecond), n)
			}
			return
		}
		if attempt == 1 {
			s.cfg.Logf("the reaper connection was lost (%v) and no reaper answers yet (%v): trying again, at least every %v; should this process be killed meanwhile, the next Start or `kindtest prune` removes its clusters", why, err, s.cfg.Redial)
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			s.mu.Lock()
			s.redialing = false
			s.mu.Unlock()
			return
		case <-t.C:
		}
		wait = min(2*wait, s.cfg.Redial)
	}
}

// reconnect makes one attempt at reaching a reaper: it dials, says hello
// and registers every cluster held, and makes that connection the
// current one once it holds all of them. It returns how many it
// registered.
func (s *Session) reconnect() (int, error) {
	cc, err := s.dial(s.ctx)
	if err != nil {
		return 0, err
	}
	if err := cc.Hello(s.id); err != nil {
		cc.Abandon()
		return 0, err
	}
	s.mu.Lock()
	s.held = append(s.held, cc)
	s.mu.Unlock()
	// Clusters may be registered or forgotten meanwhile: what cc was told
	// is compared with what is held until they agree.
	told := map[string]bool{}
	for {
		var register, forget []string
		s.mu.Lock()
		for n := range s.owned {
			if !told[n] {
				register = append(register, n)
			}
		}
		for n := range told {
			if !s.owned[n] {
				forget = append(forget, n)
			}
		}
		if len(register) == 0 && len(forget) == 0 {
			s.cur = cc
			s.redialing = false
			s.mu.Unlock()
			go s.follow(cc)
			return len(told), nil
		}
		s.mu.Unlock()
		for _, n := range register {
			if err := cc.Register(n); err != nil {
				return 0, err
			}
			told[n] = true
		}
		for _, n := range forget {
			if err := cc.Forget(n); err != nil {
				return 0, err
			}
			delete(told, n)
		}
	}
}
