//go:build unix

package interrupt

import (
	"os"
	"syscall"
)

func raise(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), s)
	}
}
