//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// vm is one boot of the guest.
type vm struct {
	Kernel, Initrd, Disk, Share string
	MemoryMiB, CPUs             int
	Accel                       accel
	Arch                        guestArch // the zero value is amd64
	KernelArgs                  string    // appended to the kernel's command line
}

func (v vm) arch() guestArch {
	if v.Arch.Name == "" {
		return guestArches[0]
	}
	return v.Arch
}

// qemuArgs boots the guest with its accelerator, its console on stdio,
// the share over 9p and a user-mode network restricted to the guest
// itself.
func (v vm) qemuArgs() []string {
	a := v.arch()
	args := append([]string{"-machine", a.Machine}, v.Accel.args()...)
	if v.Accel.Name != "kvm" && a.CPU != "" {
		args = append(args, "-cpu", a.CPU)
	}
	return append(args,
		"-smp", strconv.Itoa(v.CPUs), "-m", strconv.Itoa(v.MemoryMiB),
		"-nographic", "-no-reboot",
		"-kernel", v.Kernel, "-initrd", v.Initrd,
		"-append", strings.TrimSpace("root=/dev/vda rw console="+a.Console+" quiet systemd.unified_cgroup_hierarchy=1 "+v.KernelArgs),
		"-drive", "file="+v.Disk+",format=qcow2,if=virtio,cache=unsafe",
		"-virtfs", "local,path="+v.Share+",mount_tag=share,security_model=none,id=share",
		"-netdev", "user,id=n0,restrict=on", "-device", "virtio-net-pci,netdev=n0",
	)
}

// checkKernelArgs refuses -kernel-args that would break the guest's boot
// or qemu's command line: the root device, the console and the cgroup
// hierarchy are the tool's.
func checkKernelArgs(args string) error {
	if strings.ContainsAny(args, "\n\r\"'") {
		return fmt.Errorf("-kernel-args %q: quotes and line breaks cannot be passed to the guest's kernel; give space-separated words such as ipv6.disable=1", args)
	}
	for _, w := range strings.Fields(args) {
		name, _, _ := strings.Cut(w, "=")
		switch name {
		case "root", "rw", "ro", "console", "init", "systemd.unified_cgroup_hierarchy":
			return fmt.Errorf("-kernel-args %q: %s is set by the tool (root=/dev/vda rw, the console, cgroup v2); leave it out", args, name)
		}
	}
	return nil
}

// finishGrace is how long the guest gets to power off after its last line.
var finishGrace = 60 * time.Second

// errBootTimeout and errRunTimeout say which limit the guest ran into.
var (
	errBootTimeout = errors.New("Docker did not answer in the guest within the boot time limit")
	errRunTimeout  = errors.New("the guest did not finish within its time limit")
)

// boot runs the guest until it powers off, killing it when ctx ends, when
// Docker is not up within bootLimit or when the run exceeds runLimit. Every
// console line goes to console (a file kept with the run) and, prefixed,
// to out; the last lines are returned for error reports.
func (v vm) boot(ctx context.Context, bootLimit, runLimit time.Duration, console io.Writer, out io.Writer) (tail []string, err error) {
	cmd := exec.Command(v.arch().Qemu, v.qemuArgs()...)
	// qemu dies with this process, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Stdin = nil
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()

	ring := newTail(60)
	ready := make(chan struct{})
	var readyOnce, finishedOnce sync.Once
	finished := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			ring.add(line)
			fmt.Fprintln(console, line)
			fmt.Fprintln(out, "guest| "+line)
			if strings.Contains(line, readyMarker) {
				readyOnce.Do(func() { close(ready) })
			}
			if strings.Contains(line, finishedMarker) {
				finishedOnce.Do(func() { close(finished) })
			}
		}
		io.Copy(io.Discard, pr)
	}()

	bootTimer := time.NewTimer(bootLimit)
	defer bootTimer.Stop()
	runTimer := time.NewTimer(runLimit)
	defer runTimer.Stop()
	var shutdown <-chan time.Time
	asked := false // to quit, once the guest finished
	kill := func(why error) error {
		cmd.Process.Kill()
		<-exited
		<-scanned
		return why
	}
	for {
		select {
		case werr := <-exited:
			<-scanned
			if werr != nil && !asked {
				return ring.lines(), fmt.Errorf("qemu: %w", werr)
			}
			return ring.lines(), nil
		case <-ready:
			bootTimer.Stop()
			ready = nil
		case <-finished:
			// The results are written and synced. Seen here: the guest
			// sometimes never completes its power-off; qemu, asked to
			// quit, closes its disks cleanly.
			finished = nil
			shutdown = time.After(finishGrace)
		case <-shutdown:
			shutdown = nil
			asked = true
			cmd.Process.Signal(syscall.SIGTERM)
		case <-bootTimer.C:
			return ring.lines(), kill(fmt.Errorf("%w (%v)", errBootTimeout, bootLimit))
		case <-runTimer.C:
			return ring.lines(), kill(fmt.Errorf("%w (%v)", errRunTimeout, runLimit))
		case <-ctx.Done():
			return ring.lines(), kill(fmt.Errorf("guest stopped: %w", ctx.Err()))
		}
	}
}

// tail keeps the last n lines written to it.
type tail struct {
	mu   sync.Mutex
	n    int
	buf  []string
	next int
	full bool
}

func newTail(n int) *tail { return &tail{n: n, buf: make([]string, n)} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf[t.next] = line
	t.next = (t.next + 1) % t.n
	if t.next == 0 {
		t.full = true
	}
}

// lines returns the kept lines, oldest first.
func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return append([]string(nil), t.buf[:t.next]...)
	}
	return append(append([]string(nil), t.buf[t.next:]...), t.buf[:t.next]...)
}

// run runs a command, its output going to out, killed with ctx and with
// this process.
func run(ctx context.Context, out io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// fileExists reports whether path is a regular file.
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
