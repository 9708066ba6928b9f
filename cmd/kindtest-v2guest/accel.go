//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"
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

// chooseAccel resolves the -accel flag: "auto" is KVM when probe
// (kvmProbe outside tests) says /dev/kvm is usable and TCG otherwise;
// "kvm" insists on KVM, "tcg" on emulation.
func chooseAccel(want string, probe func() error) (accel, error) {
	switch want {
	case "tcg":
		return accel{Name: "tcg", Why: "software emulation (TCG), as -accel tcg asks"}, nil
	case "kvm", "auto":
		err := probe()
		if err == nil {
			return accel{Name: "kvm", Why: "KVM (/dev/kvm answers KVM_GET_API_VERSION and KVM_CREATE_VM)"}, nil
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
