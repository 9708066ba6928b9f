//go:build unix && !linux && !darwin

package lifetime

import (
	"errors"
	"syscall"
)

// processStart knows no start time on this OS: it asks the kernel only
// whether pid exists (EPERM: it does, but belongs to someone else).
func processStart(pid int) (string, bool) {
	err := syscall.Kill(pid, 0)
	return "", err == nil || errors.Is(err, syscall.EPERM)
}
