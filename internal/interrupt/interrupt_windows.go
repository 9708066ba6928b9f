package interrupt

import "os"

// controlCExit is STATUS_CONTROL_C_EXIT, the exit code Windows' default
// console handler ends a process with.
const controlCExit = 0xC000013A

func raise(os.Signal) { os.Exit(controlCExit) }
