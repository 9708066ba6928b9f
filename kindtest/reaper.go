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

	"github.com/kindtest/kindtest/images"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/reaper"
)

// ReaperImage is the image of the reaper container that removes a test
// process's clusters after the process is gone, even after a SIGKILL. It is
// built with the node image by `go run ./cmd/kindtest build`.
const ReaperImage = images.ReaperImage

// LabelReaper marks reaper containers.
const LabelReaper = "dev.kindtest.reaper"

const reaperPort = 7770

var (
	reaperOnce sync.Once
	reaperDone = make(chan struct{}) // closed once the reaper is up, or failed
	// reaperConn is held open for the life of the process. It is kept in a
	// package variable so that the garbage collector never finalizes it:
	// that would close it and make the reaper remove live clusters.
	reaperConn net.Conn
)

// ensureReaper starts this process's reaper once, in the background, and
// connects to it; waitReaper waits for that. The connection is never closed
// by the process: its end, however the process ends, is the reaper's
// signal. Without a reaper (no image, an engine not reached through a local
// socket, or KINDTEST_REAPER=off) the clusters of a killed process are
// removed by the next Start's sweep instead; that is logged, not fatal.
func ensureReaper(log Logger) {
	reaperOnce.Do(func() {
		go func() {
			defer close(reaperDone)
			// Its own client and context: the first cluster's may be gone
			// before the reaper is up.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dc, err := docker.New(ctx)
			if err == nil {
				defer dc.Close()
				err = startReaper(ctx, dc)
			}
			if err != nil {
				log.Printf("kindtest: no reaper for this process (%v): should it be killed, its clusters are removed by the next Start or by `kindtest prune`", err)
			}
		}()
	})
}

// waitReaper waits until ensureReaper's work is done, or ctx ends.
func waitReaper(ctx context.Context) {
	select {
	case <-reaperDone:
	case <-ctx.Done():
	}
}

func startReaper(ctx context.Context, dc *docker.Client) error {
	if os.Getenv("KINDTEST_REAPER") == "off" {
		return errors.New("KINDTEST_REAPER=off")
	}
	socket, ok := strings.CutPrefix(dc.Host(), "unix://")
	if !ok {
		return fmt.Errorf("engine at %s is not a local socket", dc.Host())
	}
	if _, err := dc.InspectImage(ctx, ReaperImage); err != nil {
		return fmt.Errorf("image %s: %w", ReaperImage, err)
	}
	name := "kindtest-reaper-" + Session()
	id, err := dc.CreateContainer(ctx, docker.ContainerSpec{
		Name:  name,
		Image: ReaperImage,
		Labels: map[string]string{
			LabelReaper:     "true",
			LabelSession:    Session(),
			LabelOwnerHost:  self().Host,
			LabelOwnerPID:   fmt.Sprint(self().PID),
			LabelOwnerStart: self().Start,
		},
		Cmd:        []string{"reaper", "--session", Session(), "--listen", fmt.Sprintf(":%d", reaperPort)},
		Binds:      []string{socket + ":/var/run/docker.sock"},
		Ports:      []docker.PortBinding{{HostIP: "127.0.0.1", ContainerPort: reaperPort}},
		AutoRemove: true,
	})
	if err != nil {
		return err
	}
	if err := dc.StartContainer(ctx, id); err != nil {
		_ = dc.RemoveContainer(context.WithoutCancel(ctx), id)
		return err
	}
	info, err := dc.InspectContainer(ctx, id)
	if err != nil {
		return err
	}
	addr := info.Ports[fmt.Sprintf("%d/tcp", reaperPort)]
	// The engine's port proxy accepts before the reaper listens; only the
	// reaper's greeting proves the connection reached it.
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return waitFor(ctx, 10*time.Millisecond, 200*time.Millisecond, func() (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, nil
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || line != reaper.Ready {
			conn.Close()
			return false, nil
		}
		_ = conn.SetReadDeadline(time.Time{})
		reaperConn = conn
		return true, nil
	})
}
