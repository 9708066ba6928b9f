package images

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestParsePlatform(t *testing.T) {
	for in, arch := range map[string]string{"linux/amd64": "amd64", "linux/arm64": "arm64", "linux/arm64/v8": "arm64"} {
		p, err := parsePlatform(in)
		if err != nil || p.arch != arch || p.foreign {
			t.Errorf("parsePlatform(%q) = %+v, %v; want arch %s", in, p, err, arch)
		}
	}
	for _, in := range []string{"", "arm64", "linux/arm/v7", "linux/amd64/v8", "windows/amd64", "linux/riscv64"} {
		_, err := parsePlatform(in)
		if err == nil || !strings.Contains(err.Error(), "linux/amd64 and linux/arm64") {
			t.Errorf("parsePlatform(%q): %v, want an error naming the platforms kindtest builds", in, err)
		}
	}
	for in, want := range map[string]string{"linux/amd64": "linux/amd64", "linux/arm64": "linux/arm64", "linux/arm64/v8": "linux/arm64"} {
		if got, err := ParsePlatform(in); err != nil || got != want {
			t.Errorf("ParsePlatform(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if err := WithPlatform("linux/s390x")(&buildConfig{}); err == nil || !strings.Contains(err.Error(), "WithPlatform") {
		t.Errorf("WithPlatform(linux/s390x): %v", err)
	}
}

// TestWithPlatformOf checks that the images built beside a node image take
// its platform, foreign or not, without asking an engine (target has no
// client to ask), and that it conflicts with WithPlatform naming another.
func TestWithPlatformOf(t *testing.T) {
	for _, res := range []Result{{Platform: "linux/arm64", suffix: "-arm64"}, {Platform: "linux/amd64"}} {
		c := &buildConfig{}
		if err := WithPlatformOf(res)(c); err != nil {
			t.Fatalf("WithPlatformOf(%+v): %v", res, err)
		}
		p, err := c.target(context.Background(), nil)
		if err != nil || p.String() != res.Platform || p.suffix() != res.suffix {
			t.Errorf("target after WithPlatformOf(%+v) = %+v, %v", res, p, err)
		}
	}
	if err := WithPlatformOf(Result{})(&buildConfig{}); err == nil || !strings.Contains(err.Error(), "WithPlatformOf") {
		t.Errorf("WithPlatformOf of no build: %v", err)
	}
	arm64 := Result{Platform: "linux/arm64", suffix: "-arm64"}
	dir := t.TempDir()
	base := []BuildOption{WithSourceDir(dir), WithCacheDir(dir), WithPlatformOf(arm64)}
	if _, err := newBuildConfig(append(base, WithPlatform("linux/amd64"))); err == nil || !strings.Contains(err.Error(), "one platform per build") {
		t.Errorf("WithPlatform(linux/amd64) with WithPlatformOf an arm64 image: %v", err)
	}
	if _, err := newBuildConfig(append(base, WithPlatform("linux/arm64/v8"))); err == nil || strings.Contains(err.Error(), "one platform per build") {
		t.Errorf("WithPlatform(linux/arm64/v8) with WithPlatformOf an arm64 image: %v, want only the missing kubernetes/go.mod", err)
	}
}

func TestPlatformNames(t *testing.T) {
	native := platform{arch: "amd64"}
	foreign := platform{arch: "arm64", foreign: true}
	if native.suffix() != "" || foreign.suffix() != "-arm64" || PlatformSuffix("linux/amd64") != "-amd64" {
		t.Errorf("suffixes %q and %q", native.suffix(), foreign.suffix())
	}
	res := Result{suffix: foreign.suffix()}
	if got := res.Local("registry.k8s.io/pause:3.10"); got != "registry.k8s.io/pause:3.10-arm64" {
		t.Errorf("Local = %s", got)
	}
	if got := (Result{}).Local("registry.k8s.io/pause:3.10"); got != "registry.k8s.io/pause:3.10" {
		t.Errorf("Local for the engine's platform = %s", got)
	}
	if QemuArch("amd64") != "x86_64" || QemuArch("arm64") != "aarch64" || QemuArch("riscv64") != "" || qemuName("arm64") != "qemu-aarch64" {
		t.Errorf("qemu's names: %q %q %q %q", QemuArch("amd64"), QemuArch("arm64"), QemuArch("riscv64"), qemuName("arm64"))
	}
	here := platform{arch: runtime.GOARCH}
	other := platform{arch: "arm64"}
	if runtime.GOARCH == "arm64" {
		other.arch = "amd64"
	}
	if runtime.GOOS == "linux" && here.binDir("/c", "v1") != filepath.Join("/c", "bin", "v1") {
		t.Errorf("binDir of this machine's platform: %s", here.binDir("/c", "v1"))
	}
	if got := other.binDir("/c", "v1"); got != filepath.Join("/c", "bin", "v1", "linux-"+other.arch) {
		t.Errorf("binDir of another platform: %s", got)
	}
}

func TestSameSeries(t *testing.T) {
	plain := "kindtest/node:v1.37.2"
	for ref, want := range map[string]bool{
		plain + "-0123456789ab":               true,
		plain + "-arm64-0123456789ab":         false, // another platform's
		plain + "-arm64":                      false,
		plain + "-0123456789abc":              false,
		plain + "-0123456789aX":               false,
		"kindtest/node:v1.37.20-0123456789ab": false,
	} {
		if got := sameSeries(ref, plain); got != want {
			t.Errorf("sameSeries(%s, %s) = %v, want %v", ref, plain, got, want)
		}
	}
	if !sameSeries(plain+"-arm64-0123456789ab", plain+"-arm64") {
		t.Error("an arm64 image is not of the arm64 series")
	}
}

// TestCheckEmulation checks what a build for another architecture than
// this machine's says when binfmt_misc lacks qemu-user-static's entry.
func TestCheckEmulation(t *testing.T) {
	if err := checkEmulation(platform{arch: runtime.GOARCH}); err != nil {
		t.Errorf("this machine's own architecture: %v", err)
	}
	other := platform{arch: "arm64", foreign: true}
	if runtime.GOARCH == "arm64" {
		other.arch = "amd64"
	}
	dir := t.TempDir()
	old := binfmtDir
	binfmtDir = dir
	t.Cleanup(func() { binfmtDir = old })

	check := func(name string, wants ...string) {
		t.Helper()
		err := checkEmulation(other)
		if len(wants) == 0 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return
		}
		for _, want := range append(wants, "apt-get install qemu-user-static", other.String()) {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want it to say %q", name, err, want)
			}
		}
	}
	check("not mounted", "is not mounted")
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte("enabled\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("no entry", "has no "+qemuName(other.arch)+" entry")
	entry := filepath.Join(dir, qemuName(other.arch))
	if err := os.WriteFile(entry, []byte("disabled\ninterpreter /usr/libexec/qemu-binfmt/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("disabled entry", "is disabled")
	if err := os.WriteFile(entry, []byte("enabled\ninterpreter /usr/libexec/qemu-binfmt/x\nflags: POF\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("enabled entry")
}

func TestWithoutPlatformSuffix(t *testing.T) {
	for ref, want := range map[string]string{
		"kindtest/node:v1.37.2-arm64":              "kindtest/node:v1.37.2",
		"kindtest/node:v1.37.2-arm64-0123456789ab": "kindtest/node:v1.37.2-0123456789ab",
		"kindtest/reaper:v3-arm64":                 "kindtest/reaper:v3",
		"kindtest/node:v1.37.2-0123456789ab":       "kindtest/node:v1.37.2-0123456789ab",
		"localhost:5000/kindtest/node":             "localhost:5000/kindtest/node",
	} {
		if got := WithoutPlatformSuffix(ref, "linux/arm64"); got != want {
			t.Errorf("WithoutPlatformSuffix(%s, linux/arm64) = %s, want %s", ref, got, want)
		}
	}
}
