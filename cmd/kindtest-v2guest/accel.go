//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// accel is how qemu runs the guest: KVM where the host offers it, else
// TCG, qemu's software emulation, about a hundred times slower.
type accel struct {
	// Name is qemu's accelerator, "kvm" or "tcg".
	Name string
	// Why says how it was chosen, for the tool's output.
	Why string
}

// args are qemu's flags for the accelerator: with KVM the guest gets the
// host's CPU model; under TCG qemu's default model, on one host thread
// per vCPU.
func (a accel) args() []string {
	if a.Name == "kvm" {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	return []string{"-accel", "tcg,thread=multi"}
}

// chooseAccel resolves the -accel flag for a guest on arch a: "auto" is
// KVM when probe (kvmProbe outside tests) says /dev/kvm is usable and TCG
// otherwise; "kvm" insists on KVM, "tcg" on emulation. A guest of another
// architecture than the host's runs under TCG: KVM runs only the host's
// own, and probe is not called.
func chooseAccel(want string, a guestArch, probe func() error) (accel, error) {
	if !a.native() && (want == "auto" || want == "kvm") {
		if want == "kvm" {
			return accel{}, fmt.Errorf("-accel kvm: the guest is %s and this host %s; KVM runs only the host's own architecture (use -accel tcg or auto)", a.Name, runtime.GOARCH)
		}
		return accel{Name: "tcg", Why: fmt.Sprintf("software emulation (TCG): the guest is %s and this host %s, and KVM runs only the host's own architecture", a.Name, runtime.GOARCH)}, nil
	}
	switch want {
	case "tcg":
		return accel{Name: "tcg", Why: "software emulation (TCG), as -accel tcg asks"}, nil
	case "kvm", "auto":
		err := probe()
		if err == nil {
			return accel{Name: "kvm", Why: "KVM (/dev/kvm creates a VM, and the guest kernel starts under it)"}, nil
		}
		if want == "kvm" {
			return accel{}, fmt.Errorf("-accel kvm: KVM is not usable: %w", err)
		}
		return accel{Name: "tcg", Why: fmt.Sprintf("software emulation (TCG), about a hundred times slower: KVM is not usable: %v", err)}, nil
	}
	return accel{}, fmt.Errorf("-accel %q: want auto, kvm or tcg", want)
}

// The ioctls of linux/kvm.h a probe needs: _IO(KVMIO=0xAE, 0x00) and
// _IO(KVMIO, 0x01).
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
	kvmAPIVersion    = 12 // stable since Linux 2.6.22
)

// kvmProbe checks that this process can use KVM: /dev/kvm opens for
// reading and writing, speaks the stable API and creates a VM. A device
// node that exists is not enough: containers and some hosts expose one
// that fails, or no permission to it.
func kvmProbe() error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	v, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmGetAPIVersion, 0)
	if errno != 0 {
		return fmt.Errorf("/dev/kvm: KVM_GET_API_VERSION: %w", errno)
	}
	if v != kvmAPIVersion {
		return fmt.Errorf("/dev/kvm: API version %d, want %d", v, kvmAPIVersion)
	}
	vmfd, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), kvmCreateVM, 0)
	if errno != 0 {
		return fmt.Errorf("/dev/kvm: KVM_CREATE_VM: %w", errno)
	}
	return syscall.Close(int(vmfd))
}

// kvmBootLimit is how long the guest kernel gets under KVM to print its
// first line; under TCG on this 2-core machine it takes about 2 s.
var kvmBootLimit = 30 * time.Second

// kvmBootProbe starts the guest's kernel under KVM, without a disk, and
// waits for its first console line ("Linux version ..."). Seen on a host
// whose KVM is kvm_pvm (a paravirtual KVM inside a Firecracker VM):
// KVM_CREATE_VM and KVM_CREATE_VCPU succeed, the firmware runs, and the
// stock Debian kernel then prints nothing for minutes.
func kvmBootProbe(ctx context.Context, kernel string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-machine", "q35", "-accel", "kvm", "-cpu", "host",
		"-smp", "1", "-m", "512", "-nographic", "-no-reboot",
		"-kernel", kernel, "-append", "console=ttyS0 panic=-1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start qemu: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	started, scanned := make(chan struct{}), make(chan struct{})
	var last string
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Linux version") {
				close(started)
				break
			}
			if t := strings.TrimSpace(sc.Text()); t != "" {
				last = t
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case <-started:
		cmd.Process.Kill()
		<-exited
		return nil
	case err := <-exited:
		<-scanned
		return fmt.Errorf("qemu -accel kvm exited before the kernel printed a line: %v (last line %q)", err, last)
	case <-ctx.Done():
		cmd.Process.Kill()
		<-exited
		why := ""
		if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil {
			why = "; this host's KVM is kvm_pvm, a paravirtual KVM that does not run this kernel"
		}
		return fmt.Errorf("the guest kernel printed nothing within %v under KVM%s", limit, why)
	}
}
