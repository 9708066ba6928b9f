// The engine's reaper container: started when none runs, reached where
// this process stands (again, should it be lost), and the cluster's
// registration with it. The protocol client, and the session that keeps
// a process's clusters registered across a lost reaper, are
// internal/reaper's Client and Session.

package kindtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
	"github.com/kindtest/kindtest/internal/poll"
	"github.com/kindtest/kindtest/internal/reaper"
)

// ReaperImage is the image of the reaper container that removes a test
// process's clusters after the process is gone, even after a SIGKILL. It is
// built with the node image by `go run ./cmd/kindtest build`.
const ReaperImage = imageref.Reaper

const reaperPort = 7770

// Time limits of the reaper. It exits after reaperIdle without a client,
// also right after its start, so a process killed while it starts the
// reaper leaves it running for that long at most.
const (
	reaperStartTimeout = 45 * time.Second
	reaperHandshake    = 15 * time.Second
	reaperIdle         = 5 * time.Second
)

// Time limits of the process's session with its reaper: how often its
// connection is checked, and the longest wait between two attempts at
// reaching a reaper again once it is lost.
const (
	reaperHeartbeat = 5 * time.Second
	reaperRedial    = 10 * time.Second
)

// processReaper returns this process's session with the engine's reaper,
// made the first time: with the running reaper, or one it starts. That
// runs on its own bounded context, so a caller that gives up waiting
// leaves nothing half-made: a reaper container this process created and
// could not connect to is removed. Should the reaper be lost later
// (killed, or no longer answering), the session reaches or starts one
// again the same way and registers every live cluster there, saying so
// once in their logs (see reaper.Session). It never logs otherwise;
// callers report the error with their own logger.
func processReaper(ctx context.Context) (*reaper.Session, error) {
	proc.reaperOnce.Do(func() {
		go func() {
			defer close(proc.reaperReady)
			proc.reaper, proc.reaperErr = connectToReaper()
		}()
	})
	select {
	case <-proc.reaperReady:
		return proc.reaper, proc.reaperErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func connectToReaper() (*reaper.Session, error) {
	if v := getenv(envReaper); v == "off" {
		return nil, errors.New("KINDTEST_REAPER=off")
	}
	ctx, cancel := context.WithTimeout(context.Background(), reaperStartTimeout)
	defer cancel()
	return reaper.NewSession(ctx, dialReaper, Session(), reaper.SessionConfig{
		Heartbeat: reaperHeartbeat,
		Redial:    reaperRedial,
		Logf:      proc.logLive,
	})
}

// dialReaper reaches the engine's reaper container, running, started or
// created, within ctx and at most reaperStartTimeout.
func dialReaper(ctx context.Context) (*reaper.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, reaperStartTimeout)
	defer cancel()
	dc, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	site, err := newReaperSite(ctx, dc)
	if err != nil {
		return nil, err
	}
	if _, err := dc.InspectImage(ctx, ReaperImage); err != nil {
		return nil, fmt.Errorf("image %s: %w", ReaperImage, err)
	}
	var rc *reaper.Client
	// Another process may be starting the reaper, or it may be exiting
	// after its idle time: try again until one answers.
	var last error
	err = poll.Until(ctx, 50*time.Millisecond, time.Second, func() (bool, error) {
		w, err := attemptReaper(ctx, dc, site)
		if err != nil {
			var stale *reaper.StaleError
			if errors.As(err, &stale) {
				return false, fmt.Errorf("reaper image %s: %w: rebuild it with `go run github.com/kindtest/kindtest/cmd/kindtest build`", ReaperImage, err)
			}
			last = err
			return false, nil
		}
		rc = w
		return true, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last attempt: %v)", err, last)
		}
		return nil, fmt.Errorf("reaper %s: %w", site.name, err)
	}
	return rc, nil
}

// attemptReaper makes one attempt at connecting to the reaper container,
// creating or starting it as needed.
func attemptReaper(ctx context.Context, dc *docker.Client, site reaperSite) (*reaper.Client, error) {
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
func createReaper(ctx context.Context, dc *docker.Client, site reaperSite) (*reaper.Client, error) {
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
		var stale *reaper.StaleError
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

// connectReaper connects to the running reaper container id.
func connectReaper(ctx context.Context, dc *docker.Client, site reaperSite, id string) (*reaper.Client, error) {
	addr, err := site.place.reaperAddress(ctx, dc, id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, reaperHandshake)
	defer cancel()
	return reaper.Dial(ctx, addr, func() bool {
		info, err := dc.InspectContainer(ctx, id)
		return err != nil || !info.Running
	})
}

// watch registers the cluster with the process's reaper before anything
// of it is created. Without a reaper the cluster is still removed at the
// end of its test, on SIGINT or SIGTERM, and at the test binary's
// deadline; only should the process be killed outright does it wait for
// the next Start's sweep or `kindtest prune`. That is said in the log.
func (c *Cluster) watch(ctx context.Context) {
	w, err := processReaper(ctx)
	if err != nil {
		c.log.Printf("kindtest: %s: no reaper watches this cluster (%v): should this process be killed, the next Start or `kindtest prune` removes it", c.name, err)
		proc.watchSignals()
		return
	}
	// Held by the session from now on, even when this reaper does not
	// hear of it: the next one reached will, and unwatch forgets it.
	c.life.mu.Lock()
	c.life.reaper = w
	c.life.mu.Unlock()
	if err := w.Register(c.name); err != nil {
		c.log.Printf("kindtest: %s: no reaper has heard of this cluster yet (%v): it is registered with the next reaper this process reaches; should this process be killed before that, the next Start or `kindtest prune` removes it", c.name, err)
		proc.watchSignals()
	}
}

// unwatch tells the reaper the cluster is no longer its business.
func (c *Cluster) unwatch() {
	c.life.mu.Lock()
	w := c.life.reaper
	c.life.reaper = nil
	c.life.mu.Unlock()
	if w != nil {
		_ = w.Forget(c.name)
	}
}

// reaperSite is where this process's reaper runs and how it is reached.
type reaperSite struct {
	place placement
	// name of the reaper container. Processes reaching a remote engine
	// share one of their own, published on the engine's address; the
	// engine's local one is published on its loopback only.
	name string
	// socket is the engine's socket as a path on the engine's host, which
	// the reaper mounts.
	socket string
}

func newReaperSite(ctx context.Context, dc *docker.Client) (reaperSite, error) {
	p, err := detectPlacement(ctx, dc)
	if err != nil {
		return reaperSite{}, err
	}
	site := reaperSite{place: p, name: proc.reaperName, socket: defaultEngineSocket}
	switch p.kind {
	case placementLocal:
		// Not always the path dialled: see MountableSocket (Docker
		// Desktop, colima).
		site.socket = dc.MountableSocket(ctx)
	case placementContainer:
		if p.socket != "" {
			site.socket = p.socket
		}
	case placementRemote:
		site.name = proc.reaperName + "-" + strings.NewReplacer(".", "-", ":", "-").Replace(p.publishIP)
	}
	return site, nil
}

// reaperAddress is where this process dials the reaper container id: its
// published port, or from inside a container of the engine, its address
// on this container's network (the reaper joins it if need be).
func (p placement) reaperAddress(ctx context.Context, dc *docker.Client, id string) (string, error) {
	info, err := dc.InspectContainer(ctx, id)
	if err != nil {
		return "", err
	}
	if p.kind != placementContainer {
		addr := info.Ports[fmt.Sprintf("%d/tcp", reaperPort)]
		if addr == "" {
			return "", fmt.Errorf("reaper container %s: port %d is not published", info.Name, reaperPort)
		}
		return addr, nil
	}
	network := p.network()
	if info.IPs[network] == "" {
		if err := dc.ConnectNetwork(ctx, network, id); err != nil {
			return "", fmt.Errorf("reaper container %s: join this process's network %s: %w", info.Name, network, err)
		}
		if info, err = dc.InspectContainer(ctx, id); err != nil {
			return "", err
		}
	}
	if info.IPs[network] == "" {
		return "", fmt.Errorf("reaper container %s has no address on network %s", info.Name, network)
	}
	return net.JoinHostPort(info.IPs[network], fmt.Sprint(reaperPort)), nil
}
