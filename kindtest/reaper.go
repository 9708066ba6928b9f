package kindtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/lifetime"
	"github.com/kindtest/kindtest/internal/reaper"
)

// ReaperImage is the image of the reaper container that removes a test
// process's clusters after the process is gone, even after a SIGKILL. It is
// built with the node image by `go run ./cmd/kindtest build`.
const ReaperImage = images.ReaperImage

const reaperPort = 7770

// Time limits of the reaper's start. The reaper gives up waiting for its
// first client after reaperFirstClient, having removed nothing, so a
// process killed while its reaper starts leaves nothing running for long.
const (
	reaperStartTimeout = 45 * time.Second
	reaperHandshake    = 15 * time.Second
	reaperFirstClient  = 20 * time.Second
	reaperReplyTimeout = 10 * time.Second
)

// The process's one reaper, started by the first cluster that needs it.
// theReaper also keeps the connection referenced for the life of the
// process: were it finalized and closed, the reaper would remove live
// clusters.
var (
	reaperOnce  sync.Once
	reaperReady = make(chan struct{})
	theReaper   *watchdog
	reaperErr   error
)

// watchdog is the process's connection to its reaper.
type watchdog struct {
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	broken error
}

// processReaper returns this process's reaper, starting it the first time.
// The start runs on its own bounded context, so a caller that gives up
// waiting leaves nothing half-made: a reaper that fails after its
// container was created is removed. It never logs; callers report the
// error with their own logger.
func processReaper(ctx context.Context) (*watchdog, error) {
	reaperOnce.Do(func() {
		go func() {
			defer close(reaperReady)
			theReaper, reaperErr = startReaper()
		}()
	})
	select {
	case <-reaperReady:
		return theReaper, reaperErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func startReaper() (*watchdog, error) {
	if v := os.Getenv("KINDTEST_REAPER"); v == "off" {
		return nil, errors.New("KINDTEST_REAPER=off")
	}
	ctx, cancel := context.WithTimeout(context.Background(), reaperStartTimeout)
	defer cancel()
	dc, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	socket, ok := strings.CutPrefix(dc.Host(), "unix://")
	if !ok {
		return nil, fmt.Errorf("engine at %s is not a local socket", dc.Host())
	}
	if _, err := dc.InspectImage(ctx, ReaperImage); err != nil {
		return nil, fmt.Errorf("image %s: %w", ReaperImage, err)
	}
	o := self()
	id, err := dc.CreateContainer(ctx, docker.ContainerSpec{
		// Unique per process, even when processes share KINDTEST_SESSION.
		Name:  "kindtest-reaper-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12],
		Image: ReaperImage,
		Labels: map[string]string{
			LabelReaper:     "true",
			LabelSession:    Session(),
			LabelOwnerHost:  o.Host,
			LabelOwnerPID:   fmt.Sprint(o.PID),
			LabelOwnerStart: o.Start,
			LabelCreated:    time.Now().UTC().Format(time.RFC3339),
		},
		Cmd: []string{"reaper", "--session", Session(), "--listen", fmt.Sprintf(":%d", reaperPort),
			"--first-client", reaperFirstClient.String()},
		Binds:      []string{socket + ":/var/run/docker.sock"},
		Ports:      []docker.PortBinding{{HostIP: "127.0.0.1", ContainerPort: reaperPort}},
		AutoRemove: true,
	})
	if err != nil {
		return nil, err
	}
	w, err := connectReaper(ctx, dc, id)
	if err != nil {
		// A reaper that no client watches would sit idle until its first
		// client wait ends; remove it now.
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		return nil, errors.Join(err, dc.RemoveContainer(rctx, id))
	}
	return w, nil
}

// connectReaper starts the created reaper container and connects to it.
func connectReaper(ctx context.Context, dc *docker.Client, id string) (*watchdog, error) {
	if err := dc.StartContainer(ctx, id); err != nil {
		return nil, err
	}
	info, err := dc.InspectContainer(ctx, id)
	if err != nil {
		return nil, err
	}
	addr := info.Ports[fmt.Sprintf("%d/tcp", reaperPort)]
	if addr == "" {
		return nil, fmt.Errorf("reaper container %s: port %d is not published", id, reaperPort)
	}
	// The engine's port proxy accepts before the reaper listens; only the
	// reaper's greeting proves the connection reached it.
	ctx, cancel := context.WithTimeout(ctx, reaperHandshake)
	defer cancel()
	var w *watchdog
	var last error
	err = waitFor(ctx, 10*time.Millisecond, 200*time.Millisecond, func() (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			last = err
			return false, nil
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		r := bufio.NewReader(conn)
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != reaper.Greeting {
			conn.Close()
			last = fmt.Errorf("greeting %q: %v", strings.TrimSpace(line), err)
			if err == nil {
				// Another reaper version answered: its image is stale.
				return false, fmt.Errorf("reaper image %s speaks %q, this library needs %q: rebuild it with `go run github.com/kindtest/kindtest/cmd/kindtest build`", ReaperImage, strings.TrimSpace(line), reaper.Greeting)
			}
			return false, nil
		}
		_ = conn.SetReadDeadline(time.Time{})
		w = &watchdog{conn: conn, r: r}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("connect to reaper at %s: %w (last attempt: %v)", addr, err, last)
	}
	return w, nil
}

// register tells the reaper that this process owns the cluster, before
// any of it exists.
func (w *watchdog) register(name string) error { return w.request("register", name) }

// forget tells the reaper that the cluster is no longer its business:
// removed, or kept on purpose.
func (w *watchdog) forget(name string) error { return w.request("forget", name) }

func (w *watchdog) request(verb, name string) error {
	if err := lifetime.CheckClusterName(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	// The connection is never closed, even when broken: closing it would
	// make a reaper that is only slow remove the process's live clusters.
	_ = w.conn.SetDeadline(time.Now().Add(reaperReplyTimeout))
	defer w.conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(w.conn, "%s %s\n", verb, name); err != nil {
		w.broken = fmt.Errorf("reaper connection: %w", err)
		return w.broken
	}
	line, err := w.r.ReadString('\n')
	if err != nil {
		w.broken = fmt.Errorf("reaper connection: %w", err)
		return w.broken
	}
	if line = strings.TrimSpace(line); line != "ok" {
		return fmt.Errorf("reaper refused %s %s: %s", verb, name, line)
	}
	return nil
}

// watch registers the cluster with the process's reaper before anything
// of it is created. Without a reaper the cluster is still removed at the
// end of its test, on SIGINT or SIGTERM, and at the test binary's
// deadline; only should the process be killed outright does it wait for
// the next Start's sweep or `kindtest prune`. That is said in the log.
func (c *Cluster) watch(ctx context.Context) {
	w, err := processReaper(ctx)
	if err == nil {
		err = w.register(c.name)
	}
	if err != nil {
		c.log.Printf("kindtest: %s: no reaper watches this cluster (%v): should this process be killed, the next Start or `kindtest prune` removes it", c.name, err)
		watchSignals()
		return
	}
	c.mu.Lock()
	c.watchdog = w
	c.mu.Unlock()
}

// unwatch tells the reaper the cluster is no longer its business.
func (c *Cluster) unwatch() {
	c.mu.Lock()
	w := c.watchdog
	c.watchdog = nil
	c.mu.Unlock()
	if w != nil {
		_ = w.forget(c.name)
	}
}
