package interrupt

import (
	"errors"
	"os"
	"os/exec"
)

// canSignal: on Windows no process can send another os.Interrupt or
// SIGTERM (os.Process.Signal supports only Kill); the child delivers the
// signal to its own handler instead.
const canSignal = false

func endedBy(err error, _ os.Signal) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && uint32(ee.ExitCode()) == controlCExit
}
