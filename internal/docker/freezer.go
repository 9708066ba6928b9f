package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
)

// thawScript writes THAWED into every frozen freezer.state below the
// cgroups of container $ID (cgroupfs's docker/$ID, systemd's
// docker-$ID.scope) in the freezer hierarchy mounted at /freezer, and
// prints what it thawed.
const thawScript = `for d in $(find /freezer -maxdepth 3 -type d -name "*$ID*"); do
  find "$d" -name freezer.state | while read -r f; do
    case "$(cat "$f")" in FROZEN|FREEZING) echo THAWED > "$f" && echo "$f" ;; esac
  done
done`

// thawFrozen frees a container that a forced removal could not kill, on a
// cgroup v1 engine: a process of it in a cgroup that the v1 freezer left
// frozen (a node's runc killed while it froze a pod's cgroup, for
// example) ignores SIGKILL, so the container's PID namespace never
// empties and the engine waits for an exit that does not come. A short
// privileged helper from the container's own image, with the host's
// freezer hierarchy mounted, thaws what is frozen below the container's
// cgroups; the frozen processes then die of the kill they were sent. It
// returns the cgroups it thawed; on other engines, or for a container that
// is not running, it does nothing.
func (c *Client) thawFrozen(ctx context.Context, id string) ([]string, error) {
	info, err := c.api.ContainerInspect(ctx, id)
	if err != nil || info.State == nil || !info.State.Running {
		return nil, nil
	}
	eng, err := c.api.Info(ctx)
	if err != nil {
		return nil, err
	}
	if eng.CgroupVersion == "2" {
		// v2's freezer lets SIGKILL through; the mount below would make a
		// cgroup named freezer.
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var labels map[string]string
	if info.Config != nil {
		// Its own labels: should this process die meanwhile, the helper
		// goes with the rest of them.
		labels = info.Config.Labels
	}
	resp, err := c.api.ContainerCreate(ctx, &container.Config{
		Image:      info.Image,
		Labels:     labels,
		Env:        []string{"ID=" + info.ID},
		Entrypoint: []string{"sh", "-c", thawScript},
	}, &container.HostConfig{
		Privileged:  true,
		SecurityOpt: []string{"seccomp=unconfined", "apparmor=unconfined", "label=disable"},
		Binds:       []string{"/sys/fs/cgroup/freezer:/freezer"},
		NetworkMode: "none",
	}, nil, nil, "")
	if err != nil {
		return nil, fmt.Errorf("thaw %s: %w", id, err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer rcancel()
		_ = c.api.ContainerRemove(rctx, resp.ID, container.RemoveOptions{Force: true})
	}()
	if err := c.api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("thaw %s: %w", id, err)
	}
	waitC, errC := c.api.ContainerWait(ctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		return nil, fmt.Errorf("thaw %s: %w", id, err)
	}
	out, err := c.ContainerLogs(ctx, resp.ID, 1000)
	if err != nil {
		return nil, fmt.Errorf("thaw %s: %w", id, err)
	}
	return strings.Fields(out), nil
}
