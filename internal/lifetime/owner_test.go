package lifetime

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

func TestProcessStartOfThisProcess(t *testing.T) {
	start, running := ProcessStart(os.Getpid())
	if !running {
		t.Fatal("this process is not running, says ProcessStart")
	}
	switch runtime.GOOS {
	case "linux", "darwin", "windows":
		if start == "" {
			t.Fatalf("no start token for this process on %s", runtime.GOOS)
		}
	}
	if again, _ := ProcessStart(os.Getpid()); again != start {
		t.Fatalf("start token changed within the process's life: %q, then %q", start, again)
	}
	if _, running := ProcessStart(0); running {
		t.Fatal("PID 0 is taken for a running owner")
	}
}

// TestOwnerAliveFollowsTheProcess: an owner is alive while its process
// runs, gone once it has ended and been reaped, and gone when the PID is
// alive but its start token is another process's (a recycled PID).
func TestOwnerAliveFollowsTheProcess(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LIFETIME_TEST_WAIT=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	start, running := ProcessStart(pid)
	if !running {
		t.Fatalf("child %d is not running, says ProcessStart", pid)
	}
	self, _ := ProcessStart(os.Getpid())
	if runtime.GOOS != "linux" && start == self && start != "" {
		// Linux counts in clock ticks: two processes may share one.
		t.Fatalf("child and this process share the start token %q", start)
	}
	if !OwnerAlive(host, pid, start) {
		t.Fatalf("running child %d (start %q) is not alive", pid, start)
	}
	if !OwnerAlive(host, pid, "") {
		t.Fatalf("running child %d with no start label is not alive", pid)
	}
	if start != "" && OwnerAlive(host, pid, start+"1") {
		t.Fatalf("child %d is alive under another process's start token", pid)
	}
	if !OwnerAlive("some-other-host", pid, "x") {
		t.Fatal("an owner on another host is not taken for alive")
	}

	in.Close() // the child exits when its stdin closes
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if _, running := ProcessStart(pid); running {
		t.Fatalf("child %d still running after it exited", pid)
	}
	if OwnerAlive(host, pid, start) {
		t.Fatalf("exited child %d is alive", pid)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("LIFETIME_TEST_WAIT") != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
