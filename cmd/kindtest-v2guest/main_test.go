//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRecipeKey(t *testing.T) {
	r := guestRecipe
	shuffled := recipe{Suite: r.Suite, Variant: r.Variant, Packages: append([]string{r.Packages[len(r.Packages)-1]}, r.Packages[:len(r.Packages)-1]...)}
	if r.key() != shuffled.key() {
		t.Error("the key depends on the order of the packages")
	}
	more := recipe{Suite: r.Suite, Variant: r.Variant, Packages: append([]string{"vim"}, r.Packages...)}
	if r.key() == more.key() {
		t.Error("another package, same key")
	}
	if baseKey(r) == r.key() || baseKey(r) == baseKey(more) {
		t.Error("the base disk's key must follow the recipe and add the guest files")
	}
	args := strings.Join(r.mmdebstrapArgs("rootfs.tar.partial"), " ")
	for _, want := range []string{"--variant=minbase", "apparmor,", "docker.io", "linux-image-amd64", "--format=tar", "bookworm rootfs.tar.partial"} {
		if !strings.Contains(args, want) {
			t.Errorf("mmdebstrap %s: lacks %q", args, want)
		}
	}
	t.Logf("recipe key %s, base disk key %s", r.key(), baseKey(r))
}

func TestCheckTools(t *testing.T) {
	all := func(string) (string, error) { return "/usr/bin/x", nil }
	amd64, arm64 := guestArches[0], guestArches[1]
	if err := checkTools(amd64, all); err != nil {
		t.Fatal(err)
	}
	some := func(name string) (string, error) {
		if name == "qemu-system-x86_64" || name == "qemu-img" || name == "mkfs.ext4" {
			return "", exec.ErrNotFound
		}
		return "/usr/bin/" + name, nil
	}
	err := checkTools(amd64, some)
	if err == nil {
		t.Fatal("missing tools accepted")
	}
	for _, want := range []string{"qemu-system-x86_64, qemu-img, mkfs.ext4 not found", "apt-get install qemu-system-x86 qemu-utils e2fsprogs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// A foreign guest also needs its emulator and the qemu-user interpreter
	// for its root file system's package scripts.
	none := func(string) (string, error) { return "", exec.ErrNotFound }
	err = checkTools(arm64, none)
	for _, want := range []string{"qemu-system-aarch64, qemu-img", "qemu-aarch64-static not found", "apt-get install qemu-system-arm qemu-utils mmdebstrap e2fsprogs tar qemu-user-static"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("arm64 guest, nothing installed: error %v lacks %q", err, want)
		}
	}
}

func TestQemuArgs(t *testing.T) {
	v := vm{Kernel: "/k", Initrd: "/i", Disk: "/d.qcow2", Share: "/s", MemoryMiB: 8192, CPUs: 2}
	args := strings.Join(v.qemuArgs(), " ")
	for _, want := range []string{"-accel tcg", "-smp 2", "-m 8192", "-kernel /k", "-initrd /i", "file=/d.qcow2,format=qcow2",
		"local,path=/s,mount_tag=share", "user,id=n0,restrict=on", "console=ttyS0", "-no-reboot"} {
		if !strings.Contains(args, want) {
			t.Errorf("qemu %s: lacks %q", args, want)
		}
	}
}

func TestKernelArgs(t *testing.T) {
	v := vm{Kernel: "/k", Initrd: "/i", Disk: "/d.qcow2", Share: "/s", MemoryMiB: 2048, CPUs: 1, KernelArgs: "ipv6.disable=1"}
	args := v.qemuArgs()
	i := slices.Index(args, "-append")
	if i < 0 || !strings.HasSuffix(args[i+1], " systemd.unified_cgroup_hierarchy=1 ipv6.disable=1") {
		t.Errorf("qemu %q: want ipv6.disable=1 after the tool's kernel arguments", args)
	}
	v.KernelArgs = ""
	if args := v.qemuArgs(); strings.HasSuffix(args[slices.Index(args, "-append")+1], " ") {
		t.Errorf("no extra arguments: %q ends in a space", args)
	}
	for _, ok := range []string{"", "ipv6.disable=1", "ipv6.disable=1  nokaslr"} {
		if err := checkKernelArgs(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"root=/dev/sda":                      "root is set by the tool",
		"console=tty0":                       "console is set by the tool",
		"a='b c'":                            "quotes and line breaks",
		"ipv6.disable=1\nx=1":                "quotes and line breaks",
		"systemd.unified_cgroup_hierarchy=0": "systemd.unified_cgroup_hierarchy is set by the tool",
	} {
		if err := checkKernelArgs(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", bad, err, want)
		}
	}
}

func TestChooseAccel(t *testing.T) {
	usable := func() error { return nil }
	absent := func() error { return &os.PathError{Op: "open", Path: "/dev/kvm", Err: syscall.ENOENT} }
	for _, c := range []struct {
		flag    string
		probe   func() error
		want    string // accelerator, or "" for an error
		wantArg string
	}{
		{"auto", usable, "kvm", "-accel kvm -cpu host"},
		{"auto", absent, "tcg", "-accel tcg,thread=multi"},
		{"kvm", usable, "kvm", "-accel kvm -cpu host"},
		{"kvm", absent, "", ""},
		{"tcg", usable, "tcg", "-accel tcg,thread=multi"},
		{"hvf", usable, "", ""},
	} {
		a, err := chooseAccel(c.flag, hostArch(t), c.probe)
		if c.want == "" {
			if err == nil {
				t.Errorf("-accel %s: chose %s, want an error", c.flag, a.Name)
			}
			continue
		}
		if err != nil || a.Name != c.want {
			t.Errorf("-accel %s: %q %v, want %s", c.flag, a.Name, err, c.want)
			continue
		}
		v := vm{Accel: a}
		if args := strings.Join(v.qemuArgs(), " "); !strings.Contains(args, c.wantArg) {
			t.Errorf("-accel %s: qemu %s lacks %q", c.flag, args, c.wantArg)
		}
	}
	// The fallback says why, for the tool's output.
	if a, _ := chooseAccel("auto", hostArch(t), absent); !strings.Contains(a.Why, "/dev/kvm") || !strings.Contains(a.Why, "TCG") {
		t.Errorf("fallback says %q: want TCG and the probe's error", a.Why)
	}
	// The real probe, on whatever this host has: logged, not asserted.
	if err := kvmProbe(); err != nil {
		t.Logf("this host: KVM not usable: %v", err)
	} else {
		t.Log("this host: KVM usable")
	}
}

func TestKVMBootProbe(t *testing.T) {
	t.Run("kernel starts", func(t *testing.T) {
		pid := fakeQemu(t, "echo 'Booting from ROM...'; echo '[    0.000000] Linux version 6.1.0-57-amd64'; exec sleep 60")
		if err := kvmBootProbe(context.Background(), "/k", 5*time.Second); err != nil {
			t.Errorf("kernel printed its first line: %v", err)
		}
		gone(t, pid)
	})
	t.Run("kernel silent", func(t *testing.T) {
		pid := fakeQemu(t, "echo 'Probing EDD (edd=off to disable)... ok'; exec sleep 60")
		began := time.Now()
		err := kvmBootProbe(context.Background(), "/k", 300*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "printed nothing within 300ms under KVM") {
			t.Errorf("silent kernel: %v", err)
		}
		if time.Since(began) > 5*time.Second {
			t.Errorf("took %v", time.Since(began))
		}
		gone(t, pid)
	})
	t.Run("qemu fails", func(t *testing.T) {
		fakeQemu(t, "echo 'qemu-system-x86_64: -accel kvm: failed to initialize kvm' >&2; exit 1")
		err := kvmBootProbe(context.Background(), "/k", 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "failed to initialize kvm") {
			t.Errorf("qemu failing: %v", err)
		}
	})
}

func TestTail(t *testing.T) {
	tl := newTail(3)
	if len(tl.lines()) != 0 {
		t.Error("new tail not empty")
	}
	for i := range 5 {
		tl.add(strconv.Itoa(i))
	}
	if got := strings.Join(tl.lines(), ","); got != "2,3,4" {
		t.Errorf("tail %s, want 2,3,4", got)
	}
}

func TestEnvFile(t *testing.T) {
	got := envFile(map[string]string{"B": "it's", "A": "x y"})
	if want := "A='x y'\nB='it'\\''s'\n"; got != want {
		t.Errorf("env file %q, want %q", got, want)
	}
}

func TestTestEnv(t *testing.T) {
	o := options{image: "mine/node:x", runPrivate: ".", runHost: "TestOneNode", runLimit: 3 * time.Hour, create: 45 * time.Minute}
	env := testEnv(o)
	for k, want := range map[string]string{"MODE": "test", "IMAGE": "mine/node:x", "RUN_HOST": "TestOneNode", "TEST_TIMEOUT": "1h0m0s", "CREATE_TIMEOUT": "45m0s", "ROOTLESS": ""} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	o.engines, o.runPrivate, o.runHost = []string{"docker"}, "", ""
	if env := testEnv(o); env["ROOTLESS"] != "docker" || env["TEST_TIMEOUT"] != "2h0m0s" || env["REAPER_IMAGE"] == "" || env["SUITE_ECHO_IMAGE"] == "" {
		t.Errorf("rootless only: %v", env)
	}
	// Each rootless engine is a run of its own within the guest's limit.
	o.engines = []string{"docker", "podman"}
	if env := testEnv(o); env["ROOTLESS"] != "docker,podman" || env["TEST_TIMEOUT"] != "1h0m0s" {
		t.Errorf("both rootless engines: %v", env)
	}
	if !strings.Contains(guestScript, `KINDTEST_IMAGE="$IMAGE"`) {
		t.Error("the guest script does not hand IMAGE to the suite as KINDTEST_IMAGE")
	}
}

func TestPrefixed(t *testing.T) {
	var b strings.Builder
	w := prefixed(&b, "p| ")
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\n"))
	if b.String() != "p| one\np| two\n" {
		t.Errorf("%q", b.String())
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestResults(t *testing.T) {
	good := map[string]string{
		"kernel.txt": "6.1.0-44-amd64\n", "tested.ok": "",
		"docker-cgroup-private.txt": " Cgroup Driver: systemd\n Cgroup Version: 2\n",
		"docker-cgroup-host.txt":    " Cgroup Driver: systemd\n Cgroup Version: 2\n",
		"test-private.log":          "=== RUN   TestOneNode\n    suite_test.go:1: TIMING x\n--- PASS: TestOneNode (1.00s)\nPASS\n",
		"test-private.rc":           "0\n", "test-host.log": "PASS\n", "test-host.rc": "0\n", "leftovers.txt": "",
	}
	both := []suiteRun{runPrivate, runHost}
	r := readResults(writeFiles(t, good), both)
	if err := r.verdict(); err != nil {
		t.Errorf("good run: %v", err)
	}
	rep := r.report()
	for _, want := range []string{"Cgroup Version: 2", "suite (engine as installed): PASS", "--- PASS: TestOneNode", "TIMING x",
		"default-cgroupns-mode=host): PASS", "after the tests: nothing"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}

	bad := map[string]string{}
	for k, v := range good {
		bad[k] = v
	}
	bad["test-host.rc"] = "1\n"
	bad["test-host.log"] = "--- FAIL: TestTwoNodes (9.00s)\n    boom\nFAIL\n"
	bad["leftovers.txt"] = "volume x-var\n"
	delete(bad, "tested.ok")
	r = readResults(writeFiles(t, bad), both)
	err := r.verdict()
	if err == nil {
		t.Fatal("failed run passed")
	}
	for _, want := range []string{"did not finish", "default-cgroupns-mode=host): exit code 1", "still holds objects"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("verdict %q lacks %q", err, want)
		}
	}
	rep = r.report()
	for _, want := range []string{"FAIL (exit code 1)", "--- FAIL: TestTwoNodes", "boom", "volume x-var"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	// Without the host-mode run, its missing results do not count.
	delete(good, "test-host.rc")
	if err := readResults(writeFiles(t, good), []suiteRun{runPrivate}).verdict(); err != nil {
		t.Errorf("run without the host-mode suite: %v", err)
	}

	// The rootless runs: their verdicts and the rootless engine's leftovers count.
	rl := wantedRuns(options{engines: []string{"docker"}})
	if names := runNames(rl); names != "docker-undelegated docker docker-killed" {
		t.Fatalf("-run '' -run-host-cgroupns '' -rootless docker: runs %s", names)
	}
	rootless := map[string]string{
		"kernel.txt": "6.1.0-44-amd64\n", "tested.ok": "", "docker-cgroup-private.txt": " Cgroup Version: 2\n",
		"docker-cgroup-docker.txt":    " Cgroup Version: 2\n rootless\n",
		"test-docker-undelegated.log": "--- PASS: TestRootlessWithoutDelegation (0.10s)\n", "test-docker-undelegated.rc": "0\n",
		"test-docker.log": "--- PASS: TestOneNode (60.00s)\n", "test-docker.rc": "0\n",
		"test-docker-killed.log": "--- PASS: TestKilledProcessLeavesNothing (20.00s)\n", "test-docker-killed.rc": "0\n",
		"leftovers.txt": "", "leftovers-docker.txt": "",
	}
	r = readResults(writeFiles(t, rootless), rl)
	if err := r.verdict(); err != nil {
		t.Errorf("rootless run: %v", err)
	}
	rep = r.report()
	for _, want := range []string{"suite (rootless Docker, only memory and pids delegated: refused up front): PASS", "--- PASS: TestRootlessWithoutDelegation",
		"suite (rootless Docker, cpu cpuset io memory pids delegated): PASS",
		"suite (rootless Docker, a test process killed with SIGKILL mid-create: nothing left within 30 s): PASS", "--- PASS: TestKilledProcessLeavesNothing",
		"left in the guest's rootless Docker after the tests: nothing"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	rootless["leftovers-docker.txt"] = "volume c-control-plane-var\n"
	rootless["test-docker.rc"] = "1\n"
	rootless["test-docker-killed.rc"] = "1\n"
	err = readResults(writeFiles(t, rootless), rl).verdict()
	for _, want := range []string{"rootless Docker, cpu cpuset io memory pids delegated): exit code 1",
		"killed with SIGKILL mid-create: nothing left within 30 s): exit code 1", "rootless Docker still holds objects"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("verdict %v lacks %q", err, want)
		}
	}

	// Rootless podman's runs, alone and after Docker's, with leftovers of
	// their own.
	pm := wantedRuns(options{engines: []string{"podman"}})
	if names := runNames(pm); names != "podman-undelegated podman podman-killed" {
		t.Fatalf("-rootless podman: runs %s", names)
	}
	if names := runNames(wantedRuns(options{runPrivate: ".", engines: []string{"docker", "podman"}})); names != "private docker-undelegated docker docker-killed podman-undelegated podman podman-killed" {
		t.Fatalf("-rootless docker,podman: runs %s", names)
	}
	podman := map[string]string{
		"kernel.txt": "6.1.0-44-amd64\n", "tested.ok": "", "docker-cgroup-private.txt": " Cgroup Version: 2\n",
		"docker-cgroup-podman.txt":    " Cgroup Version: 2\n rootless\n",
		"test-podman-undelegated.log": "--- PASS: TestRootlessWithoutDelegation (0.30s)\n", "test-podman-undelegated.rc": "0\n",
		"test-podman.log": "--- PASS: TestNodeOnly (50.00s)\n", "test-podman.rc": "0\n",
		"test-podman-killed.log": "--- PASS: TestKilledProcessLeavesNothing (20.00s)\n", "test-podman-killed.rc": "0\n",
		"leftovers.txt": "", "leftovers-podman.txt": "",
		// Docker's, from a run that did not ask for it, do not count.
		"leftovers-docker.txt": "volume x\n",
	}
	r = readResults(writeFiles(t, podman), pm)
	if err := r.verdict(); err != nil {
		t.Errorf("rootless podman run: %v", err)
	}
	rep = r.report()
	for _, want := range []string{"suite (rootless podman, only memory and pids delegated: refused up front): PASS",
		"suite (rootless podman, cpu cpuset io memory pids delegated): PASS", "--- PASS: TestNodeOnly",
		"left in the guest's rootless podman after the tests: nothing"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "volume x") {
		t.Errorf("report shows rootless Docker's leftovers of a podman-only run:\n%s", rep)
	}
	podman["leftovers-podman.txt"] = "container kt-a-control-plane kindtest/node:v1.37.2 Exited\n"
	delete(podman, "test-podman-killed.rc")
	err = readResults(writeFiles(t, podman), pm).verdict()
	for _, want := range []string{"nothing left within 30 s): exit code -1", "the guest's rootless podman still holds objects"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("verdict %v lacks %q", err, want)
		}
	}
}

// runNames are the runs' names, space-separated.
func runNames(runs []suiteRun) string {
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
	}
	return strings.Join(names, " ")
}

func TestRootlessEngines(t *testing.T) {
	for _, c := range []struct {
		flag, want string // want "" with wantErr: an error
		wantErr    bool
	}{
		{"", "", false},
		{"docker", "docker", false},
		{"podman", "podman", false},
		{"podman,docker", "docker,podman", false},
		{" docker , podman,docker", "docker,podman", false},
		{"docker,lxc", "", true},
		{"Docker", "", true},
	} {
		got, err := rootlessEngines(c.flag)
		if c.wantErr {
			if err == nil || !strings.Contains(err.Error(), "want a comma-separated list of docker and podman") {
				t.Errorf("-rootless %q: %v %v, want an error naming the engines", c.flag, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != c.want {
			t.Errorf("-rootless %q: %v %v, want %s", c.flag, got, err, c.want)
		}
	}
	// The guest runs each engine the list names, and only those.
	for _, want := range []string{`*,docker,*) rootless docker`, `*,podman,*) rootless podman`,
		`podman) sock=podman/podman.sock`, `DOCKER_HOST="unix:///run/user/$RL_UID/$sock"`, "systemctl --user enable --now podman.socket",
		`network_backend = "netavark"`} {
		if !strings.Contains(guestScript, want) {
			t.Errorf("the guest script lacks %q", want)
		}
	}
}

// TestGuestBinaries: the kindtest package's tests go into the share only
// for rootless runs, and the guest script runs each binary it is given.
func TestGuestBinaries(t *testing.T) {
	if bins := guestBinaries(options{}); len(bins) != 1 || bins["v2suite.test"] != "./kindtest/testdata/v2guest" {
		t.Errorf("no rootless engine: binaries %v, want the suite alone", bins)
	}
	bins := guestBinaries(options{engines: []string{"podman"}})
	if bins["kindtest.test"] != "./kindtest" || len(bins) != 2 {
		t.Errorf("-rootless podman: binaries %v, want the suite and ./kindtest's tests", bins)
	}
	for name := range bins {
		if !strings.Contains(guestScript, name) {
			t.Errorf("the guest script never runs %s", name)
		}
	}
	if !strings.Contains(guestScript, `kindtest.test '^TestKilledProcessLeavesNothing$'`) {
		t.Error("the guest script does not kill a test process on the rootless engines")
	}
}

// fakeQemu puts a qemu-system-x86_64 on PATH that runs script (sh), after
// recording its PID in the returned file.
func fakeQemu(t *testing.T, script string) string {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	body := "#!/bin/sh\necho $$ > " + pidFile + "\n" + script + "\n"
	if err := os.WriteFile(filepath.Join(dir, "qemu-system-x86_64"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return pidFile
}

// gone fails the test if the fake qemu's process still exists.
func gone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("qemu (pid %d) left behind: kill -0 says %v", pid, err)
	}
}

func TestBootLimits(t *testing.T) {
	var console, out strings.Builder
	v := vm{Kernel: "k", Initrd: "i", Disk: "d", Share: "s", MemoryMiB: 2048, CPUs: 1}

	t.Run("powers off", func(t *testing.T) {
		pid := fakeQemu(t, "echo booting; echo '"+readyMarker+" at 1s'; echo bye")
		tail, err := v.boot(context.Background(), 5*time.Second, 10*time.Second, &console, &out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(tail, "|") != "booting|"+readyMarker+" at 1s|bye" {
			t.Errorf("tail %q", tail)
		}
		gone(t, pid)
	})
	t.Run("finished but no power-off", func(t *testing.T) {
		defer func(g time.Duration) { finishGrace = g }(finishGrace)
		finishGrace = 200 * time.Millisecond
		pid := fakeQemu(t, "echo '"+readyMarker+"'; echo '"+finishedMarker+"'; exec sleep 60")
		began := time.Now()
		if _, err := v.boot(context.Background(), 5*time.Second, 10*time.Second, &console, &out); err != nil {
			t.Errorf("finished guest: %v", err)
		}
		if time.Since(began) > 5*time.Second {
			t.Errorf("took %v to stop a finished guest", time.Since(began))
		}
		gone(t, pid)
	})
	t.Run("boot limit", func(t *testing.T) {
		pid := fakeQemu(t, "echo stuck in the kernel; exec sleep 60")
		began := time.Now()
		tail, err := v.boot(context.Background(), 300*time.Millisecond, 10*time.Second, &console, &out)
		if !errors.Is(err, errBootTimeout) || time.Since(began) > 5*time.Second {
			t.Errorf("err %v after %v, want the boot limit", err, time.Since(began))
		}
		if len(tail) != 1 || tail[0] != "stuck in the kernel" {
			t.Errorf("tail %q", tail)
		}
		gone(t, pid)
	})
	t.Run("run limit", func(t *testing.T) {
		pid := fakeQemu(t, "echo '"+readyMarker+"'; exec sleep 60")
		_, err := v.boot(context.Background(), 300*time.Millisecond, time.Second, &console, &out)
		if !errors.Is(err, errRunTimeout) {
			t.Errorf("err %v, want the run limit (the boot limit ends at the ready line)", err)
		}
		gone(t, pid)
	})
	t.Run("interrupted", func(t *testing.T) {
		pid := fakeQemu(t, "exec sleep 60")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := v.boot(ctx, 10*time.Second, 10*time.Second, &console, &out)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want the context's", err)
		}
		gone(t, pid)
	})
	t.Run("qemu fails", func(t *testing.T) {
		fakeQemu(t, "echo 'qemu: could not open disk' >&2; exit 1")
		tail, err := v.boot(context.Background(), 5*time.Second, 10*time.Second, &console, &out)
		if err == nil || len(tail) != 1 || !strings.Contains(tail[0], "could not open disk") {
			t.Errorf("err %v tail %q", err, tail)
		}
	})
}

// TestGuestScriptLints checks the script the guest runs: bash's syntax
// check always, and shellcheck, which CI installs (.ci/run).
func TestGuestScriptLints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guest.sh")
	if err := os.WriteFile(path, []byte(guestScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("shellcheck is not installed (apt-get install shellcheck)")
		}
		t.Log("shellcheck is not installed: only bash -n checked the guest script")
		return
	}
	if out, err := exec.Command("shellcheck", "-s", "bash", path).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// hostArch is the guest machine of this host's own architecture.
func hostArch(t *testing.T) guestArch {
	t.Helper()
	a, err := archFor(runtime.GOARCH)
	if err != nil {
		t.Skipf("no guest machine for this host's architecture: %v", err)
	}
	return a
}

// foreignArch is a guest machine of another architecture than this host's.
func foreignArch() guestArch {
	if runtime.GOARCH == "arm64" {
		return guestArches[0]
	}
	return guestArches[1]
}

func TestArchFor(t *testing.T) {
	for _, name := range []string{"amd64", "arm64"} {
		if a, err := archFor(name); err != nil || a.Name != name {
			t.Errorf("archFor(%s): %+v %v", name, a, err)
		}
	}
	if _, err := archFor("riscv64"); err == nil || !strings.Contains(err.Error(), "want one of amd64, arm64") {
		t.Errorf("archFor(riscv64): %v", err)
	}
}

func TestForeignImageNames(t *testing.T) {
	f := foreignArch()
	host := f.hostRef("kindtest/node:v1.37.2")
	if host != "kindtest/node:v1.37.2-"+f.Name {
		t.Errorf("host name of a foreign node image: %s", host)
	}
	if g := f.guestRef(host); g != "kindtest/node:v1.37.2" {
		t.Errorf("guest name of %s: %s", host, g)
	}
	n := hostArch(t)
	if n.hostRef("kindtest/reaper:v3") != "kindtest/reaper:v3" || n.guestRef("kindtest/reaper:v3") != "kindtest/reaper:v3" {
		t.Error("a native guest's images are renamed")
	}
	if got := tagPairs(map[string]string{"b:1-arm64": "b:1", "a:1-arm64": "a:1"}); got != "a:1-arm64=a:1 b:1-arm64=b:1" {
		t.Errorf("tagPairs: %q", got)
	}
}

func TestArm64Recipe(t *testing.T) {
	arm64, _ := archFor("arm64")
	r := recipeFor(arm64)
	amd := recipeFor(guestArches[0])
	if amd.key() != guestRecipe.key() {
		t.Errorf("the amd64 guest's key changed: %s, was %s", amd.key(), guestRecipe.key())
	}
	if r.key() == amd.key() || baseKey(r) == baseKey(amd) {
		t.Error("arm64 and amd64 guests share a key")
	}
	args := strings.Join(r.mmdebstrapArgs("out.tar"), " ")
	for _, want := range []string{"--architectures=arm64", "linux-image-arm64", "docker.io"} {
		if !strings.Contains(args, want) {
			t.Errorf("mmdebstrap %s: lacks %q", args, want)
		}
	}
	for _, unwanted := range append([]string{"linux-image-amd64"}, rootlessPackages...) {
		if strings.Contains(args, unwanted) {
			t.Errorf("mmdebstrap %s: has %q", args, unwanted)
		}
	}
	if !strings.Contains(strings.Join(amd.mmdebstrapArgs("out.tar"), " "), "--architectures=amd64") {
		t.Error("the amd64 recipe does not name its architecture")
	}
	t.Logf("arm64 recipe key %s, base disk key %s", r.key(), baseKey(r))
}

func TestQemuArgsArm64(t *testing.T) {
	arm64, _ := archFor("arm64")
	tcg, err := chooseAccel("tcg", arm64, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := vm{Kernel: "/k", Initrd: "/i", Disk: "/d.qcow2", Share: "/s", MemoryMiB: 4096, CPUs: 2, Accel: tcg, Arch: arm64}
	args := strings.Join(v.qemuArgs(), " ")
	for _, want := range []string{"-machine virt", "-accel tcg,thread=multi", "-cpu neoverse-n1", "console=ttyAMA0", "root=/dev/vda"} {
		if !strings.Contains(args, want) {
			t.Errorf("qemu %s: lacks %q", args, want)
		}
	}
}

func TestChooseAccelForeign(t *testing.T) {
	f := foreignArch()
	probed := false
	probe := func() error { probed = true; return nil }
	a, err := chooseAccel("auto", f, probe)
	if err != nil || a.Name != "tcg" || !strings.Contains(a.Why, "KVM runs only the host's own architecture") {
		t.Errorf("-accel auto, %s guest: %+v %v", f.Name, a, err)
	}
	if _, err := chooseAccel("kvm", f, probe); err == nil || !strings.Contains(err.Error(), "use -accel tcg") {
		t.Errorf("-accel kvm, %s guest: %v", f.Name, err)
	}
	if probed {
		t.Error("KVM probed for a foreign guest")
	}
	if _, err := chooseAccel("hvf", f, probe); err == nil {
		t.Error("-accel hvf accepted")
	}
}
