package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// ReaperImage is the reference BuildReaper tags the reaper image with; the
// kindtest package runs its reaper containers from it. The tag is the
// reaper protocol's version.
const ReaperImage = imageref.Reaper

// ReaperRef is where `kindtest build --push` puts the reaper image for a
// node image pushed as nodeRef, and where kindtest pulls it from: beside
// it, as reaper:v1 in the same registry path
// (registry.example.com/team/kindtest/reaper:v1 for
// registry.example.com/team/kindtest/node:v1.37.2).
func ReaperRef(nodeRef string) string { return imageref.Beside(nodeRef, ReaperImage) }

// BuildReaper builds the reaper image: the kindtest command, built from the
// checkout's root module (outside a checkout: from the kindtest module this
// program was built with, in the module cache), alone in an image FROM
// scratch. The Go build is cached; the image is rebuilt only when the binary
// changed.
func BuildReaper(ctx context.Context, opts ...BuildOption) error {
	return buildKindtestImage(ctx, "reaper", ReaperImage, []string{"/kindtest"}, opts)
}

// buildKindtestImage builds an image FROM scratch holding the kindtest
// command alone, tagged ref, run with entrypoint; what is the image's
// name in messages and its build cache directory.
func buildKindtestImage(ctx context.Context, what, ref string, entrypoint []string, opts []BuildOption) error {
	start := time.Now()
	cfg, err := newBuildConfig(opts)
	if err != nil {
		return err
	}
	cli, err := docker.New(ctx)
	if err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	defer cli.Close()
	p, err := cfg.target(ctx, cli)
	if err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	ref += p.suffix()
	dir := p.cacheSubdir(filepath.Join(cfg.cacheDir, what))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	bin := filepath.Join(dir, "kindtest")
	root := filepath.Dir(cfg.sourceDir)
	if cfg.embedded {
		if root, err = libraryModuleDir(ctx, cfg.cacheDir); err != nil {
			return fmt.Errorf("build %s image: %w", what, err)
		}
	}
	if err := command(ctx, root, append(slices.Clone(goEnv), p.goEnv()...), "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/kindtest"); err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	ep, err := json.Marshal(entrypoint)
	if err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	dockerfile := "FROM scratch\nCOPY kindtest /kindtest\nENTRYPOINT " + string(ep) + "\n"
	built, err := buildBinaryImage(ctx, cli, cfg.logger, ref, dockerfile, "kindtest", bin, sum, p)
	if err != nil {
		return fmt.Errorf("build %s image: %w", what, err)
	}
	if !built {
		cfg.logger.Printf("%s image %s is up to date (%s)", what, ref, time.Since(start).Round(time.Millisecond))
		return nil
	}
	cfg.logger.Printf("%s image %s built in %s", what, ref, time.Since(start).Round(time.Millisecond))
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// libraryModule is the module path of kindtest.
const libraryModule = "github.com/kindtest/kindtest"

// libraryModuleDir returns the directory of the kindtest module this
// program was built with: the one this file was compiled from or, when
// its path was trimmed (-trimpath), the same version fetched into the
// module cache.
func libraryModuleDir(ctx context.Context, cacheDir string) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(file))
		if _, err := os.Stat(filepath.Join(root, "cmd", "kindtest", "main.go")); err == nil {
			return root, nil
		}
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("this program carries no build information to find the kindtest module by")
	}
	mod := &info.Main
	for _, dep := range info.Deps {
		if dep.Path == libraryModule {
			mod = dep
		}
	}
	if mod.Replace != nil {
		mod = mod.Replace
	}
	if mod.Path != libraryModule || mod.Version == "" || mod.Version == "(devel)" {
		return "", fmt.Errorf("cannot tell which version of %s this program was built from (%s %s): build from a kindtest checkout", libraryModule, mod.Path, mod.Version)
	}
	if filepath.IsAbs(mod.Path) {
		return mod.Path, nil
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", libraryModule+"@"+mod.Version)
	cmd.Dir = cacheDir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr != nil || dl.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s", libraryModule, mod.Version, err, dl.Error)
	}
	return dl.Dir, nil
}

// The load-balancer image is built the way the reaper image is, and its
// code lives in this file because the file is not an input of the node
// image (see notNodeImageInputs in hash.go).

// LoadBalancerImage is the reference BuildLoadBalancer tags the
// load-balancer image with; the kindtest package runs the load balancer in
// front of a cluster's control planes (WithControlPlanes) from it. The tag
// is the version of the `kindtest lb` command's flags.
const LoadBalancerImage = imageref.LoadBalancer

// LoadBalancerRef is where `kindtest build --push` puts the load-balancer
// image for a node image pushed as nodeRef, and where kindtest pulls it
// from: beside the node image, as the reaper image is.
func LoadBalancerRef(nodeRef string) string { return imageref.Beside(nodeRef, LoadBalancerImage) }

// BuildLoadBalancer builds the load-balancer image: the kindtest command
// alone in an image FROM scratch, run as `kindtest lb` (a TCP proxy, see
// internal/lb), built like the reaper image (see BuildReaper).
func BuildLoadBalancer(ctx context.Context, opts ...BuildOption) error {
	return buildKindtestImage(ctx, "load-balancer", LoadBalancerImage, []string{"/kindtest", "lb"}, opts)
}
