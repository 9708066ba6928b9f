package kindtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/poll"
	"github.com/kindtest/kindtest/internal/reaper"
)

// ReaperImage is the image of the reaper container that removes a test
// process's clusters after the process is gone, even after a SIGKILL. It is
// built with the node image by `go run ./cmd/kindtest build`.
const ReaperImage = images.ReaperImage

const reaperPort = 7770

// reaperName is the name of the engine's one reaper container, shared by
// every test process that uses the engine; the suffix is the protocol
// version. Tests of the reaper's own start give their child processes
// reapers of their own.
var reaperName = "kindtest-reaper-2"

// Time limits of the reaper. It exits after reaperIdle without a client,
// also right after its start, so a process killed while it starts the
// reaper leaves it running for that long at most.
const (
	reaperStartTimeout = 45 * time.Second
	reaperHandshake    = 15 * time.Second
	reaperIdle         = 5 * time.Second
	reaperReplyTimeout = 10 * time.Second
)

// reaperHeartbeat is how often the process checks its reaper connection,
// and reaperRedial the longest wait between two attempts at reaching a
// reaper again once it is lost.
const (
	reaperHeartbeat = 5 * time.Second
	reaperRedial    = 10 * time.Second
)

// The process's session with the engine's reapers, made by the first
// cluster that needs it. theReaper also keeps its connections referenced
// for the life of the process: were one finalized and closed, the reaper
// would remove live clusters.
var (
	reaperOnce  sync.Once
	reaperReady = make(chan struct{})
	theReaper   *reaper.Client
	reaperErr   error
)

// processReaper returns this process's session with the engine's reaper,
// made the first time: with the running reaper, or one it starts. That
// runs on its own bounded context, so a caller that gives up waiting
// leaves nothing half-made: a reaper container this process created and
// could not connect to is removed. Should the reaper be lost later (killed,
// or no longer answering), the session reaches or starts one again and
// registers every live cluster there, saying so once in their logs (see
// reaper.Client). It never logs otherwise; callers report the error with
// their own logger.
func processReaper(ctx context.Context) (*reaper.Client, error) {
	reaperOnce.Do(func() {
		go func() {
			defer close(reaperReady)
			theReaper, reaperErr = connectToReaper()
		}()
	})
	select {
	case <-reaperReady:
		return theReaper, reaperErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func connectToReaper() (*reaper.Client, error) {
	if v := getenv(envReaper); v == "off" {
		return nil, errors.New("KINDTEST_REAPER=off")
	}
	ctx, cancel := context.WithTimeout(context.Background(), reaperStartTimeout)
	defer cancel()
	return reaper.NewClient(ctx, dialReaper, Session(), reaper.ClientConfig{
		ReplyTimeout: reaperReplyTimeout,
		Heartbeat:    reaperHeartbeat,
		Redial:       reaperRedial,
		Logf:         logLive,
	})
}

// dialReaper reaches the engine's reaper, running, started or created, and
// reads its greeting, within ctx and at most reaperStartTimeout.
func dialReaper(ctx context.Context) (net.Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(ctx, reaperStartTimeout)
	defer cancel()
	dc, err := docker.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer dc.Close()
	site, err := newReaperSite(ctx, dc)
	if err != nil {
		return nil, nil, err
	}
	if _, err := dc.InspectImage(ctx, ReaperImage); err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", ReaperImage, err)
	}
	// Another process may be starting the reaper, or it may be exiting
	// after its idle time: try again until one answers.
	var conn *reaperConn
	var last error
	err = poll.Until(ctx, 50*time.Millisecond, time.Second, func() (bool, error) {
		rc, err := attemptReaper(ctx, dc, site)
		if err != nil {
			var stale *staleReaperError
			if errors.As(err, &stale) {
				return false, err
			}
			last = err
			return false, nil
		}
		conn = rc
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last attempt: %v)", err, last)
		}
		return nil, nil, fmt.Errorf("reaper %s: %w", site.name, err)
	}
	return conn.conn, conn.r, nil
}

// reaperConn is a connection to a reaper container whose greeting was
// read, and the reader holding what followed it.
type reaperConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// logLive writes a line of the process's reaper session to the log of
// every live cluster: the clusters it is about.
func logLive(format string, args ...any) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for c := range live {
		c.log.Printf("kindtest: "+format, args...)
	}
}

// attemptReaper makes one attempt at connecting to the reaper container,
// creating or starting it as needed.
func attemptReaper(ctx context.Context, dc *docker.Client, site reaperSite) (*reaperConn, error) {
	info, err := dc.InspectContainer(ctx, site.name)
	switch {
	case docker.IsNotFound(err):
		return createReaper(ctx, dc, site)
	case err != nil:
		return nil, err
	case info.Status == "created":
		// Left by a process killed between creating and starting it, or
		// being started by another process right now.
		if err := dc.StartContainer(ctx, info.ID); err != nil {
			return nil, err
		}
		return connectReaper(ctx, dc, site, info.ID)
	case info.Running:
		return connectReaper(ctx, dc, site, info.ID)
	}
	// Exited: the engine is removing it (it is started with auto-remove).
	return nil, fmt.Errorf("reaper container is %s", info.Status)
}

// createReaper creates and starts the reaper container. A reaper this
// process created but cannot connect to is removed.
func createReaper(ctx context.Context, dc *docker.Client, site reaperSite) (*reaperConn, error) {
	o := self()
	id, err := dc.CreateContainer(ctx, docker.ContainerSpec{
		Name:  site.name,
		Image: ReaperImage,
		Labels: map[string]string{
			LabelReaper:     "true",
			LabelOwnerHost:  o.Host,
			LabelOwnerPID:   fmt.Sprint(o.PID),
			LabelOwnerStart: o.Start,
			LabelCreated:    time.Now().UTC().Format(time.RFC3339),
		},
		Cmd:        []string{"reaper", "--listen", fmt.Sprintf(":%d", reaperPort), "--idle", reaperIdle.String()},
		Binds:      []string{site.socket + ":/var/run/docker.sock"},
		Ports:      []docker.PortBinding{{HostIP: site.place.publishIP, ContainerPort: reaperPort}},
		AutoRemove: true,
	})
	if err != nil {
		return nil, err
	}
	if err := dc.StartContainer(ctx, id); err != nil {
		return nil, errors.Join(err, removeReaper(dc, id))
	}
	w, err := connectReaper(ctx, dc, site, id)
	if err != nil {
		var stale *staleReaperError
		if errors.As(err, &stale) {
			return nil, errors.Join(err, removeReaper(dc, id))
		}
		return nil, err
	}
	return w, nil
}

func removeReaper(dc *docker.Client, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return dc.RemoveContainer(ctx, id)
}

// staleReaperError says the reaper speaks another protocol version: its
// image is older or newer than this library.
type staleReaperError struct{ greeting string }

func (e *staleReaperError) Error() string {
	return fmt.Sprintf("reaper image %s answered %q, this library needs %q: rebuild it with `go run github.com/kindtest/kindtest/cmd/kindtest build`", ReaperImage, e.greeting, reaper.Greeting)
}

// connectReaper connects to the running reaper container id.
func connectReaper(ctx context.Context, dc *docker.Client, site reaperSite, id string) (*reaperConn, error) {
	addr, err := site.place.reaperAddress(ctx, dc, id)
	if err != nil {
		return nil, err
	}
	// The engine's port proxy accepts before the reaper listens; only the
	// reaper's greeting proves the connection reached it.
	ctx, cancel := context.WithTimeout(ctx, reaperHandshake)
	defer cancel()
	var w *reaperConn
	var last error
	err = poll.Until(ctx, 10*time.Millisecond, 200*time.Millisecond, func() (bool, error) {
		gone := func() bool {
			info, err := dc.InspectContainer(ctx, id)
			return err != nil || !info.Running
		}
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
		if err != nil || line != reaper.Greeting {
			conn.Close()
			if err == nil && strings.HasPrefix(line, "kindtest-reaper") {
				return false, &staleReaperError{greeting: line}
			}
			last = fmt.Errorf("greeting %q: %v", line, err)
			// A reaper that refuses new clients is exiting.
			if gone() {
				return false, fmt.Errorf("reaper exited: %v", last)
			}
			return false, nil
		}
		_ = conn.SetReadDeadline(time.Time{})
		w = &reaperConn{conn: conn, r: r}
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last attempt: %v)", err, last)
		}
		return nil, fmt.Errorf("connect to reaper at %s: %w", addr, err)
	}
	return w, nil
}

// watch registers the cluster with the process's reaper before anything
// of it is created. Without a reaper the cluster is still removed at the
// end of its test, on SIGINT or SIGTERM, and at the test binary's
// deadline; only should the process be killed outright does it wait for
// the next Start's sweep or `kindtest prune`. That is said in the log.
func (c *Cluster) watch(ctx context.Context) {
	w, err := processReaper(ctx)
	if err == nil {
		// Held by the session from now on, even when this reaper did
		// not hear of it: the next one will.
		c.mu.Lock()
		c.watchdog = w
		c.mu.Unlock()
		err = w.Register(c.name)
	}
	if err != nil {
		c.log.Printf("kindtest: %s: no reaper watches this cluster (%v): should this process be killed, the next Start or `kindtest prune` removes it", c.name, err)
		watchSignals()
	}
}

// unwatch tells the reaper the cluster is no longer its business.
func (c *Cluster) unwatch() {
	c.mu.Lock()
	w := c.watchdog
	c.watchdog = nil
	c.mu.Unlock()
	if w != nil {
		_ = w.Forget(c.name)
	}
}
