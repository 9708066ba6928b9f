package lifetime

import (
	"errors"
	"strconv"

	"golang.org/x/sys/windows"
)

// stillActive is the exit code GetExitCodeProcess reports for a process
// that has not ended (STILL_ACTIVE).
const stillActive = 259

// processStart reads the process's creation time with GetProcessTimes, in
// 100 ns units since 1601 as Windows keeps it. A process that has ended
// can still be opened while someone holds a handle to it; its exit code
// says it has ended.
func processStart(pid int) (string, bool) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	switch {
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		// It exists, but belongs to a user we may not look at.
		return "", true
	case err != nil:
		return "", false
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err == nil && code != stillActive {
		return "", false
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return "", true
	}
	return strconv.FormatUint(uint64(created.HighDateTime)<<32|uint64(created.LowDateTime), 10), true
}
