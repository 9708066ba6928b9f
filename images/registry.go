package images

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// RegistryImage is the reference BuildRegistry tags the registry image
// with; the kindtest package runs a cluster's registry (WithRegistry) from
// it. The tag is the version of the distribution registry inside, which
// TestRegistryImageVersion keeps equal to registry/go.mod's.
const RegistryImage = imageref.Registry

// RegistryRef is where `kindtest build --push` puts the registry image for
// a node image pushed as nodeRef, and where kindtest pulls it from when a
// cluster WithRegistry needs it: beside the node image, as the reaper
// image is (registry.example.com/team/kindtest/registry:v3.1.2 for
// registry.example.com/team/kindtest/node:v1.37.2).
func RegistryRef(nodeRef string) string { return imageref.Beside(nodeRef, RegistryImage) }

// registryArchive holds a copy of the files of the nested module
// registry/, which module zips leave out, so that a module that only
// requires kindtest builds the same registry image. It is not an input of
// the node image (see notNodeImageInputs): the registry runs beside the
// nodes, not in them. Regenerate it with
// `go test ./images -run TestRegistryArchive -update`.
//
//go:embed registry.txtar
var registryArchive []byte

// RegistryPort is where the registry listens inside its container.
const RegistryPort = imageref.RegistryPort

// BuildRegistry builds the registry image: the CNCF distribution registry
// (github.com/distribution/distribution/v3), built from the nested module
// registry/ of the checkout (outside a checkout: from the copy carried in
// this package), alone in an image FROM scratch. The Go build is cached;
// the image is rebuilt only when the binary changed.
func BuildRegistry(ctx context.Context, opts ...BuildOption) error {
	start := time.Now()
	cfg, err := newBuildConfig(opts)
	if err != nil {
		return err
	}
	src := filepath.Join(cfg.sourceDir, "registry")
	if cfg.embedded {
		if src, err = writeRegistrySource(cfg.cacheDir); err != nil {
			return fmt.Errorf("build registry image: %w", err)
		}
	}
	cli, err := docker.New(ctx)
	if err != nil {
		return fmt.Errorf("build registry image: %w", err)
	}
	defer cli.Close()
	p, err := cfg.target(ctx, cli)
	if err != nil {
		return fmt.Errorf("build registry image: %w", err)
	}
	ref := RegistryImage + p.suffix()
	bin := filepath.Join(p.cacheSubdir(filepath.Join(cfg.cacheDir, "registry")), "registry")
	sum, err := buildRegistryBinary(ctx, src, bin, p.goEnv())
	if err != nil {
		return fmt.Errorf("build registry image: %w", err)
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY registry /registry\nEXPOSE %d\nENTRYPOINT [\"/registry\"]\n", RegistryPort)
	built, err := buildBinaryImage(ctx, cli, cfg.logger, ref, dockerfile, "registry", bin, sum, p)
	if err != nil {
		return fmt.Errorf("build registry image: %w", err)
	}
	if !built {
		cfg.logger.Printf("registry image %s is up to date (%s)", ref, time.Since(start).Round(time.Millisecond))
		return nil
	}
	cfg.logger.Printf("registry image %s built in %s", ref, time.Since(start).Round(time.Millisecond))
	return nil
}

// buildRegistryBinary builds the registry module in src into bin, with
// env added to goEnv, and returns the binary's SHA-256.
func buildRegistryBinary(ctx context.Context, src, bin string, env []string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	if err := command(ctx, src, append(slices.Clone(goEnv), env...), "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "."); err != nil {
		return "", err
	}
	return fileSHA256(bin)
}

// writeRegistrySource writes the registry module carried in this package
// under cacheDir/source/registry-<hash> and returns that directory. As
// with the node image's inputs, a finished directory is only ever renamed
// into place.
func writeRegistrySource(cacheDir string) (string, error) {
	files, err := parseTxtar(registryArchive)
	if err != nil {
		return "", fmt.Errorf("registry.txtar: %w", err)
	}
	recipe := make([]string, 0, 2*len(files))
	for _, f := range files {
		recipe = append(recipe, f.rel, string(f.data))
	}
	final := filepath.Join(cacheDir, "source", "registry-"+hashStrings(recipe...)[:hashLength])
	err = writeDirOnce(final, func(tmp string) error {
		for _, f := range files {
			p := filepath.Join(tmp, filepath.FromSlash(f.rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, f.data, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	return final, err
}
