package lifetime

import "os"

// OwnerAlive reports whether the process that labelled a resource as its
// owner (LabelOwnerHost, LabelOwnerPID, LabelOwnerStart) still runs. An
// owner on another host is taken for alive: only its own host can tell.
// A start token that differs from the process's now means the PID was
// recycled, and the owner is gone. An owner with no start token, or a
// process whose start this host cannot read, is judged by its PID alone.
func OwnerAlive(host string, pid int, start string) bool {
	self, _ := os.Hostname()
	if host != self || pid <= 0 {
		return true
	}
	now, running := ProcessStart(pid)
	if !running {
		return false
	}
	return start == "" || now == "" || now == start
}

// ProcessStart returns an opaque token for when process pid started, and
// whether that process runs at all. The token is the same for the
// process's whole life and differs for a later process given the same PID;
// it is "" where the OS does not tell (running is still reported). How it
// is read is per OS: /proc on Linux, the kern.proc.pid sysctl on macOS,
// GetProcessTimes on Windows.
func ProcessStart(pid int) (start string, running bool) {
	if pid <= 0 {
		return "", false
	}
	return processStart(pid)
}
