// Package interrupt names the signals that interrupt a test process and
// gives one its default effect again once kindtest has cleaned up. What a
// signal is differs per OS: on Unix SIGINT and SIGTERM are signals a
// process can raise on itself; on Windows the Go runtime turns console
// events into os.Interrupt (Ctrl+C, Ctrl+Break) and syscall.SIGTERM (the
// console closing, logoff, shutdown), which another process cannot send
// and this one cannot raise, so their default effect (the process ends
// with STATUS_CONTROL_C_EXIT) is reproduced by hand. No SIGUSR1 or other
// Unix-only signal is handled in the test process on any OS; the node
// containers' boot signal goes through the engine's API.
package interrupt

import (
	"os"
	"syscall"
)

// Signals returns the signals that interrupt a test process, for
// signal.Notify: os.Interrupt and syscall.SIGTERM, on every OS.
func Signals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM} }

// Raise gives sig its default effect on this process: the caller must have
// stopped relaying it (signal.Stop) first. On Unix the process ends by
// that signal, unless it is ignored, when Raise returns; on Windows the
// process exits with the code an unhandled console event gives it.
func Raise(sig os.Signal) { raise(sig) }
