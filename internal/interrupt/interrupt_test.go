package interrupt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the interrupted process: with
// INTERRUPT_TEST_SIGNAL set to an index into Signals it relays that
// signal, and on receiving it (from the test, or from itself where no
// other process can send one) stops relaying and raises it.
func TestMain(m *testing.M) {
	if v := os.Getenv("INTERRUPT_TEST_SIGNAL"); v != "" {
		var i int
		fmt.Sscan(v, &i)
		sig := Signals()[i]
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, Signals()...)
		fmt.Println("ready")
		if os.Getenv("INTERRUPT_TEST_SELF") != "" {
			ch <- sig
		}
		got := <-ch
		signal.Stop(ch)
		Raise(got)
		// A signal a process sends itself arrives a moment after Kill
		// returns; only an ignored one lets the process live on.
		time.Sleep(10 * time.Second)
		fmt.Println("still running after Raise")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestRaiseEndsTheProcessAsTheSignalWould: a process that caught an
// interrupting signal and raised it again ends as the signal alone would
// have ended it, so that its parent (go test, a CI runner) sees an
// interrupted process, not a passing or failing one.
func TestRaiseEndsTheProcessAsTheSignalWould(t *testing.T) {
	for i, sig := range Signals() {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("INTERRUPT_TEST_SIGNAL=%d", i))
			if !canSignal {
				cmd.Env = append(cmd.Env, "INTERRUPT_TEST_SELF=1")
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			r := bufio.NewReader(out)
			if line, err := r.ReadString('\n'); strings.TrimSpace(line) != "ready" {
				t.Fatalf("child: %q, %v", line, err)
			}
			if canSignal {
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
			}
			rest, _ := r.ReadString(0)
			err = cmd.Wait()
			if !endedBy(err, sig) {
				t.Fatalf("child ended with %v (output %q), not as %v ends a process", err, rest, sig)
			}
		})
	}
}
