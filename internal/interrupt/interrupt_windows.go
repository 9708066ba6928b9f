package interrupt

import "os"

// controlCExit is STATUS_CONTROL_C_EXIT, the exit code Windows' default
// console handler ends a process with.
const controlCExit uint32 = 0xC000013A

func raise(os.Signal) {
	code := controlCExit
	// os.Exit takes an int; Windows reads it back as the uint32 it was.
	os.Exit(int(int32(code)))
}
