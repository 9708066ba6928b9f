// What the builders of kindtest's nested Go modules share: the node image
// builder and the conformance tool (cmd/kindtest-conformance) both derive
// modules that build Kubernetes at a release, stamp its version into the
// binaries, and find the checkout they run from. They live here, in the
// node image's inputs, so that a change to them rebuilds the node image.

package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ParseRelease reads vMAJOR.MINOR.PATCH; pre-releases are not releases.
func ParseRelease(v string) ([3]int, bool) {
	var r [3]int
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if !strings.HasPrefix(v, "v") || len(parts) != 3 {
		return r, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') || strings.HasPrefix(p, "+") {
			return r, false
		}
		r[i] = n
	}
	return r, true
}

// NewestReleases returns, newest first, the newest v1 release of each of
// the n newest minors among served.
func NewestReleases(served []string, n int) []string {
	newest := map[int][3]int{} // minor: its newest release
	for _, v := range served {
		r, ok := ParseRelease(v)
		if !ok || r[0] != 1 {
			continue
		}
		if old, ok := newest[r[1]]; !ok || old[2] < r[2] {
			newest[r[1]] = r
		}
	}
	minors := make([]int, 0, len(newest))
	for m := range newest {
		minors = append(minors, m)
	}
	slices.Sort(minors)
	slices.Reverse(minors)
	var out []string
	for _, m := range minors[:min(n, len(minors))] {
		r := newest[m]
		out = append(out, fmt.Sprintf("v%d.%d.%d", r[0], r[1], r[2]))
	}
	return out
}

// KubernetesLDFlags stamps the version that `kubectl version` and
// `kubelet --version` print (the e2e framework compares kubectl's with the
// server's). A fixed build date keeps the link reproducible.
func KubernetesLDFlags(version string) string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	flags := []string{"-s", "-w"}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+version,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean")
		if pkg == "k8s.io/component-base/version" {
			flags = append(flags, "-X", pkg+".buildDate=1970-01-01T00:00:00Z")
		}
	}
	return strings.Join(flags, " ")
}

// StagingModules returns, sorted, the modules that a go.mod of
// k8s.io/kubernetes replaces with its own staging directories
// ("k8s.io/api => ./staging/src/k8s.io/api"): the modules that Kubernetes
// publishes from its repository at v0.MINOR.PATCH.
func StagingModules(goMod []byte) []string {
	var mods []string
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "replace "))
		arrow := slices.Index(fields, "=>")
		if arrow < 1 || arrow+1 >= len(fields) || !strings.HasPrefix(fields[arrow+1], "./staging/") {
			continue
		}
		if !slices.Contains(mods, fields[0]) {
			mods = append(mods, fields[0])
		}
	}
	slices.Sort(mods)
	return mods
}

// StagingVersion is the version at which the k8s.io staging modules
// (k8s.io/api, k8s.io/client-go, ...) are published for a Kubernetes
// release: v1.36.3 → v0.36.3.
func StagingVersion(kubernetesVersion string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(kubernetesVersion, "v"), ".")
	return "v0." + rest
}

// RequiredVersion returns the version at which the go.mod file at path
// requires module.
func RequiredVersion(path, module string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, module)
}

// Versions lists the versions of module path that the module proxy
// serves, asked from dir with env added to the environment.
func Versions(ctx context.Context, dir, path string, env ...string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-versions", "-json", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var info struct{ Versions []string }
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, err
	}
	return info.Versions, nil
}

// GoEnv is one setting of go env, "" when it cannot be read.
func GoEnv(ctx context.Context, name string) string {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// FindCheckout returns the kindtest checkout that holds marker (a path
// inside it, such as "images/kubernetes/go.mod"), above the working
// directory or, failing that, this source file (in images/); searched lists where it
// looked, for the caller's error.
func FindCheckout(marker string) (root string, searched []string, ok bool) {
	if wd, err := os.Getwd(); err == nil {
		searched = append(searched, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		searched = append(searched, filepath.Dir(file))
	}
	for _, start := range searched {
		for dir := start; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
				return dir, searched, true
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", searched, false
}
