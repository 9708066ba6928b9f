//go:build unix

package interrupt

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// canSignal: another process can send this OS's interrupting signals.
const canSignal = true

func endedBy(err error, sig os.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
