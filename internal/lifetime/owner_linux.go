package lifetime

import (
	"fmt"
	"os"
	"strings"
)

// processStart reads the start time (in clock ticks since boot) from
// /proc/PID/stat. A zombie has ended: it waits only for its parent to
// reap it.
func processStart(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	return parseStat(string(b))
}

// parseStat reads the state and start time out of a /proc/PID/stat line.
func parseStat(s string) (start string, running bool) {
	// The command name, field 2, may hold spaces and parentheses; the
	// fields after its last ')' are plain.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", true
	}
	fields := strings.Fields(s[i+1:])
	// After ')' the list starts at field 3 (state); field 22 is starttime.
	if len(fields) < 20 {
		return "", true
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return "", false
	}
	return fields[19], true
}
