// The host side of a cluster: the temporary directory that holds a
// handle's kubeconfig, and its removal however the handle ends.

package kindtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// workDirPrefix starts the name of every work directory kindtest makes in
// os.TempDir(): workDirPrefix + cluster name + "-" + MkdirTemp's digits.
const workDirPrefix = "kindtest-"

// workDirOwnerFile, in a work directory, names the process whose handle
// made it ("PID START", see lifetime.ProcessStart). The sweep removes a
// directory whose owner is gone; a kept cluster's directory has none, and
// stays until the cluster is deleted.
const workDirOwnerFile = "owner"

// newWorkDir makes a work directory for a handle on cluster, owned by this
// process. It holds an admin kubeconfig, so it is private to the user.
func newWorkDir(cluster string) (string, error) {
	dir, err := os.MkdirTemp("", workDirPrefix+cluster+"-")
	if err != nil {
		return "", err
	}
	o := self()
	if err := os.WriteFile(filepath.Join(dir, workDirOwnerFile), []byte(fmt.Sprintf("%d %s\n", o.PID, o.Start)), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// workDirCluster returns the cluster a work directory's base name is of,
// or false when kindtest did not make it.
func workDirCluster(base string) (string, bool) {
	rest, ok := strings.CutPrefix(base, workDirPrefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", false
	}
	if _, err := strconv.ParseUint(rest[i+1:], 10, 64); err != nil {
		return "", false
	}
	name := rest[:i]
	if lifetime.CheckClusterName(name) != nil {
		return "", false
	}
	return name, true
}

// removeWorkDirs removes the work directories in tmp (os.TempDir()) of
// every handle on cluster: once the cluster is gone its kubeconfigs are of
// no use, and they hold its admin credentials.
func removeWorkDirs(tmp, cluster string) error {
	dirs, err := filepath.Glob(filepath.Join(tmp, workDirPrefix+cluster+"-*"))
	if err != nil {
		return err
	}
	var errs []string
	for _, d := range dirs {
		if name, ok := workDirCluster(filepath.Base(d)); !ok || name != cluster {
			continue // another cluster whose name starts with this one's
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if errs != nil {
		return fmt.Errorf("remove its work directories: %s", strings.Join(errs, "; "))
	}
	return nil
}

// sweepWorkDirs removes the work directories in tmp (os.TempDir()) whose
// owner process is gone (killed before it could remove them) and returns
// how many. A directory without an owner file is a kept cluster's, or not
// kindtest's: it stays.
func sweepWorkDirs(tmp string) (int, error) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0, err
	}
	host, _ := os.Hostname()
	n := 0
	var errs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, ok := workDirCluster(e.Name()); !ok {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, workDirOwnerFile))
		if err != nil {
			continue
		}
		pid, start, ok := parseWorkDirOwner(string(raw))
		if !ok || lifetime.OwnerAlive(host, pid, start) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		n++
	}
	if errs != nil {
		return n, fmt.Errorf("remove work directories of processes that are gone: %s", strings.Join(errs, "; "))
	}
	return n, nil
}

// parseWorkDirOwner reads an owner file's "PID START" (START may be empty).
func parseWorkDirOwner(s string) (pid int, start string, ok bool) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return 0, "", false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0, "", false
	}
	if len(f) == 2 {
		start = f[1]
	}
	return pid, start, true
}
