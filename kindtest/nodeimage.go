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

// checkPlatform refuses a node image made for another platform than the
// engine's, before any container exists: its nodes would run under
// emulation, where systemd, containerd and the kubelet cannot work, or not
// at all.
func checkPlatform(img docker.Image, engine docker.EngineInfo, ref, host string) error {
	want, ok := engine.Platform()
	if !ok {
		return nil // an architecture we cannot name: leave it to the engine
	}
	if samePlatform(img.Platform, want) {
		return nil
	}
	return fmt.Errorf("node image %s is for %s, but the engine at %s runs %s (%s) containers: "+
		"its nodes would run under emulation, if at all. Use a node image made for %s: "+
		"`kindtest build` makes one for the engine's platform unless -platform says otherwise",
		ref, img.Platform, host, want, engine.Architecture, want)
}

// samePlatform reports whether two "os/arch[/variant]" platforms are the
// same; a variant only one of them names (linux/arm64/v8 and linux/arm64)
// does not tell them apart.
func samePlatform(a, b string) bool {
	aParts, bParts := strings.SplitN(a, "/", 3), strings.SplitN(b, "/", 3)
	if len(aParts) < 2 || len(bParts) < 2 || aParts[0] != bParts[0] || aParts[1] != bParts[1] {
		return false
	}
	return len(aParts) == 2 || len(bParts) == 2 || aParts[2] == bParts[2]
}
