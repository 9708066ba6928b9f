package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// DefaultKubernetesVersion is the Kubernetes version that the nested module
// images/kubernetes builds.
const DefaultKubernetesVersion = imageref.KubernetesVersion

// DefaultNodeImage is the reference Build tags the node image with, and the
// image kindtest runs its nodes from unless told otherwise.
const DefaultNodeImage = imageref.Node

// Logger receives progress lines; *log.Logger and testing.T's Logf adapters
// satisfy it.
type Logger interface {
	Printf(format string, args ...any)
}

// Result describes the node image that Build built or found up to date.
type Result struct {
	// Image is the node image's plain reference, "kindtest/node:<version>"
	// (DefaultNodeImage unless WithKubernetesVersion says otherwise).
	Image string
	// ContentImage is the same image under its content-derived tag,
	// "kindtest/node:<version>-<hash>".
	ContentImage string
	// ContentHash is the full hash of the image's inputs.
	ContentHash string
	// KubernetesVersion is the version of the Kubernetes binaries inside.
	KubernetesVersion string
	// Platform is the platform of the image ("linux/arm64"): the engine's
	// unless WithPlatform says otherwise. An image for another platform
	// than the engine's carries the architecture after the version
	// ("kindtest/node:v1.37.2-arm64").
	Platform string
	// suffix is what the images of a platform not the engine's carry
	// after their tag: "-arm64".
	suffix string
	// Built is false when the image existed already and nothing was built.
	Built bool
	// Duration is how long Build took.
	Duration time.Duration
}

// BuildOption configures Build.
type BuildOption func(*buildConfig) error

type buildConfig struct {
	logger    Logger
	sourceDir string
	cacheDir  string
	// kubernetesVersion is the version to build; "" means the one the
	// checked-in images/kubernetes module requires.
	kubernetesVersion string
	// embedded is set when sourceDir holds the inputs written out from
	// this package rather than a checkout.
	embedded bool
	// platform is the platform to build for; "" means the engine's.
	platform string
	// resolved is the target WithPlatformOf gives, so that the engine is
	// not asked again; nil means resolvePlatform finds it.
	resolved *platform
	// inEngine makes the root file systems in a builder container on the
	// engine (see WithInEngine).
	inEngine bool
	// builderFrom is the image the builder container starts FROM:
	// DebianImage, or another reference in a test.
	builderFrom string
	// stock builds Kubernetes without the timing patches (see
	// WithStockKubernetes).
	stock bool
}

// StockSuffix is what a node image built WithStockKubernetes carries
// after its version: kindtest/node:v1.37.2-stock.
const StockSuffix = "-stock"

// WithStockKubernetes builds Kubernetes as released, without the timing
// patches a node image carries by default (they make a few of its
// start-up waits try at once instead of a second later; see
// timingpatch.go and docs/performance.md). The image is tagged
// kindtest/node:<version>-stock (and -stock-<hash>), beside the default
// one; run clusters from it with KINDTEST_IMAGE or WithImage.
func WithStockKubernetes() BuildOption {
	return func(c *buildConfig) error {
		c.stock = true
		return nil
	}
}

// WithLogger sends progress lines (each step and its duration) to l.
// Default: silent.
func WithLogger(l Logger) BuildOption {
	return func(c *buildConfig) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithSourceDir names the images/ directory of a kindtest checkout to build
// from. Default: found by walking up from the working directory, then from
// the directory this package was compiled from, to the first directory that
// holds images/kubernetes/go.mod; outside a checkout (a module that requires
// kindtest, the module cache), the inputs carried in this package, written
// out under the cache directory. Both give the same content hash.
func WithSourceDir(dir string) BuildOption {
	return func(c *buildConfig) error {
		if dir == "" {
			return errors.New("WithSourceDir: empty directory")
		}
		c.sourceDir = dir
		return nil
	}
}

// WithCacheDir sets where built binaries, root file systems and the build
// lock are kept. Default: kindtest under os.UserCacheDir()
// ($XDG_CACHE_HOME/kindtest or ~/.cache/kindtest on Linux).
func WithCacheDir(dir string) BuildOption {
	return func(c *buildConfig) error {
		if dir == "" {
			return errors.New("WithCacheDir: empty directory")
		}
		c.cacheDir = dir
		return nil
	}
}

func newBuildConfig(opts []BuildOption) (*buildConfig, error) {
	c := &buildConfig{logger: silent{}, builderFrom: DebianImage}
	var errs []error
	for _, opt := range opts {
		if err := opt(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(append(errs, c.checkPlatforms())...); err != nil {
		return nil, fmt.Errorf("node image options: %w", err)
	}
	if c.cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("node image cache directory: %w (set one with WithCacheDir)", err)
		}
		c.cacheDir = filepath.Join(base, "kindtest")
	}
	if c.sourceDir == "" {
		dir, err := findSourceDir()
		if errors.Is(err, errNoCheckout) {
			// Not in a checkout (a user's module, the module cache): build
			// from the inputs carried in this package.
			dir, err = writeEmbeddedInputs(c.cacheDir)
			c.embedded = true
		}
		if err != nil {
			return nil, err
		}
		c.sourceDir = dir
	}
	if _, err := os.Stat(filepath.Join(c.sourceDir, "kubernetes", "go.mod")); err != nil {
		return nil, fmt.Errorf("node images are built from a kindtest checkout: %s has no kubernetes/go.mod: %w", c.sourceDir, err)
	}
	return c, nil
}

// findSourceDir returns the images/ directory of the kindtest checkout that
// holds the working directory or, failing that, this source file.
func findSourceDir() (string, error) {
	root, searched, ok := FindCheckout(filepath.Join("images", "kubernetes", "go.mod"))
	if !ok {
		return "", fmt.Errorf("%w: no images/kubernetes/go.mod above %q", errNoCheckout, searched)
	}
	return filepath.Join(root, "images"), nil
}

// errNoCheckout says that no kindtest checkout holds the inputs.
var errNoCheckout = errors.New("no kindtest checkout")

type silent struct{}

func (silent) Printf(string, ...any) {}

// Build makes sure the node image for the inputs exists, and builds it
// (with every image it depends on) when it does not. A build with nothing
// changed only hashes the inputs and asks the engine for the tag.
// Concurrent builds, in this process or others, wait for each other.
// The inputs are those of the kindtest checkout around the working
// directory or, outside one, those carried in this package (see
// WithSourceDir): a module that only requires kindtest builds the same
// image as a clone of the same version.
func Build(ctx context.Context, opts ...BuildOption) (Result, error) {
	start := time.Now()
	cfg, err := newBuildConfig(opts)
	if err != nil {
		return Result{}, err
	}
	checkedIn, err := RequiredVersion(filepath.Join(cfg.sourceDir, "kubernetes", "go.mod"), kubernetesModule)
	if err != nil {
		return Result{}, err
	}
	version := checkedIn
	if cfg.kubernetesVersion != "" {
		version = cfg.kubernetesVersion
	}
	cli, err := docker.New(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("build node image: %w", err)
	}
	defer cli.Close()
	p, err := cfg.target(ctx, cli)
	if err != nil {
		return Result{}, fmt.Errorf("build node image: %w", err)
	}
	flavour := version
	if cfg.stock {
		flavour += StockSuffix
	}
	hash, err := contentHash(cfg.sourceDir, flavour, p.String())
	if err != nil {
		return Result{}, err
	}
	plain := "kindtest/node:" + flavour + p.suffix()
	res := Result{
		Image:             plain,
		ContentImage:      plain + "-" + hash[:hashLength],
		ContentHash:       hash,
		KubernetesVersion: version,
		Platform:          p.String(),
		suffix:            p.suffix(),
	}

	if ok, err := res.upToDate(ctx, cli); err != nil || ok {
		res.Duration = time.Since(start)
		if ok {
			cfg.logger.Printf("node image %s is up to date (%s)", res.ContentImage, res.Duration.Round(time.Millisecond))
		}
		return res, err
	}

	if err := os.MkdirAll(cfg.cacheDir, 0o755); err != nil {
		return Result{}, fmt.Errorf("build node image: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(cfg.cacheDir, "build.lock"), cfg.logger)
	if err != nil {
		return Result{}, fmt.Errorf("build node image: %w", err)
	}
	defer unlock()
	// Another process may have built it while this one waited for the lock.
	if ok, err := res.upToDate(ctx, cli); err != nil || ok {
		res.Duration = time.Since(start)
		return res, err
	}

	b := &builder{cfg: cfg, cli: cli, res: res, platform: p, binDir: p.binDir(cfg.cacheDir, flavour),
		deriveKubernetes: version != checkedIn}
	if err := b.run(ctx); err != nil {
		return Result{}, fmt.Errorf("build node image %s: %w", res.ContentImage, err)
	}
	res.Built = true
	res.Duration = time.Since(start)
	cfg.logger.Printf("node image %s built in %s", res.ContentImage, res.Duration.Round(time.Second))
	return res, nil
}

// Local returns the reference under which the build keeps the image that
// the cluster knows as ref: ref itself for the engine's platform, ref with
// the platform's suffix after the tag for another
// ("registry.k8s.io/pause:3.10-arm64").
func (r Result) Local(ref string) string { return ref + r.suffix }

// upToDate reports whether the content-tagged image exists, and makes sure
// the plain tag points at it.
func (r Result) upToDate(ctx context.Context, cli *docker.Client) (bool, error) {
	img, err := cli.InspectImage(ctx, r.ContentImage)
	if docker.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("build node image: %w", err)
	}
	if plain, err := cli.InspectImage(ctx, r.Image); err == nil && plain.ID == img.ID {
		return true, nil
	}
	if err := cli.TagImage(ctx, r.ContentImage, r.Image); err != nil {
		return false, fmt.Errorf("build node image: %w", err)
	}
	return true, nil
}
