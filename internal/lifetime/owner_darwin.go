package lifetime

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// zombie is SZOMB of <sys/proc.h>: a process that has ended and waits to
// be reaped.
const zombie = 5

// processStart reads the process's start time from the kern.proc.pid
// sysctl (what ps -o lstart shows). For a PID with no process the kernel
// returns no record, which the sysctl wrapper reports as EIO.
func processStart(pid int) (string, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	switch {
	case errors.Is(err, unix.EIO), errors.Is(err, unix.ESRCH):
		return "", false
	case err != nil:
		return "", signalZero(pid)
	case int(kp.Proc.P_pid) != pid || kp.Proc.P_stat == zombie:
		return "", false
	}
	t := kp.Proc.P_starttime
	return fmt.Sprintf("%d.%06d", t.Sec, t.Usec), true
}

// signalZero asks the kernel whether pid exists, where its start cannot be
// read: EPERM means it does, but belongs to someone else.
func signalZero(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
