// The node image as the engine has it, pulled first when it names a
// registry.

package kindtest

import (
	"context"
	"fmt"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// nodeImage returns the node image ref as the engine has it. A missing
// image that names a registry (KINDTEST_IMAGE=registry.example.com/...) is
// pulled first, with the reaper image beside it; any other missing image is
// an error that says the three ways to get one.
func nodeImage(ctx context.Context, dc *docker.Client, ref string, log Logger) (docker.Image, error) {
	img, err := dc.InspectImage(ctx, ref)
	if err == nil || !docker.IsNotFound(err) {
		if err != nil {
			err = fmt.Errorf("kindtest: %w", err)
		}
		return img, err
	}
	host := docker.RegistryHost(ref)
	if host == "" {
		return docker.Image{}, fmt.Errorf("kindtest: node image %s is not in the engine at %s. Get it one of three ways: "+
			"build it with `go run github.com/kindtest/kindtest/cmd/kindtest build` (from a module that requires kindtest, or a clone); "+
			"pull it: set KINDTEST_IMAGE (or WithImage) to a registry reference such as registry.example.com/kindtest/node:%s, pushed there with `kindtest build --push REF`; "+
			"or load it from a file made by `kindtest image save -o FILE` with `go run github.com/kindtest/kindtest/cmd/kindtest image load FILE`",
			ref, dc.Host(), KubernetesVersion)
	}
	if err := pullImage(ctx, dc, ref, log); err != nil {
		return docker.Image{}, fmt.Errorf("kindtest: node image %s is not in the engine, and pulling it failed: %w. "+
			"Check the reference (is the tag pushed? `kindtest build --push %s` pushes it), that the registry %s answers, "+
			"and for a private registry `docker login %s`; or build the image or load it from a file (`kindtest build`, `kindtest image load FILE`)",
			ref, err, ref, host, host)
	}
	// The reaper's image is beside it too. Without it the run still
	// works: the clusters of a killed process are then removed by the
	// next Start's sweep.
	if err := reaperImage.ensureImage(ctx, dc, ref, log); err != nil {
		log.Printf("kindtest: %v: the clusters of a killed test process are removed by the next Start or `kindtest prune` instead", err)
	}
	img, err = dc.InspectImage(ctx, ref)
	if err != nil {
		return docker.Image{}, fmt.Errorf("kindtest: %w", err)
	}
	return img, nil
}

// enginePlatforms maps the architectures engines report (uname's names,
// and Go's) to the platform names images carry.
var enginePlatforms = map[string]string{
	"x86_64": "amd64", "amd64": "amd64",
	"aarch64": "arm64", "arm64": "arm64",
	"armv7l": "arm", "s390x": "s390x", "ppc64le": "ppc64le", "riscv64": "riscv64",
}

// checkPlatform refuses a node image made for another platform than the
// engine's, before any container exists: its nodes would run under
// emulation, where systemd, containerd and the kubelet cannot work, or not
// at all.
func checkPlatform(img docker.Image, engine docker.EngineInfo, ref, host string) error {
	want, ok := enginePlatforms[engine.Architecture]
	if !ok {
		return nil // an architecture we cannot name: leave it to the engine
	}
	goos, arch, _ := strings.Cut(img.Platform, "/")
	arch, _, _ = strings.Cut(arch, "/")
	if goos == "linux" && arch == want {
		return nil
	}
	return fmt.Errorf("node image %s is for %s, but the engine at %s runs linux/%s (%s) containers: "+
		"its nodes would run under emulation, if at all. Use a node image made for linux/%s: "+
		"`kindtest build` makes one for the architecture of the machine it runs on",
		ref, img.Platform, host, want, engine.Architecture, want)
}
