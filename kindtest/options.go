package kindtest

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/kindtest/kindtest/images"
)

// DefaultImage is the node image clusters use unless WithImage says
// otherwise. Build it with `go run ./cmd/kindtest build` in a kindtest
// checkout.
const DefaultImage = images.DefaultNodeImage

// Logger receives progress lines. *testing.T's Logf, log.Printf and
// fmt.Printf-like functions fit through LoggerFunc.
type Logger interface {
	Printf(format string, args ...any)
}

// LoggerFunc adapts a Printf-like function to Logger.
type LoggerFunc func(format string, args ...any)

// Printf calls f.
func (f LoggerFunc) Printf(format string, args ...any) { f(format, args...) }

type discard struct{}

func (discard) Printf(string, ...any) {}

// KeepPolicy says when a cluster outlives its test. One rule applies
// wherever a cluster's end is decided: at the end of its test, on SIGINT
// or SIGTERM, at the test binary's deadline, in the reaper and in the
// orphan sweep (see the README's table).
type KeepPolicy int

const (
	// KeepNever removes the cluster however its test or process ends. The
	// default.
	KeepNever KeepPolicy = iota
	// KeepOnFailure keeps the cluster when its test is seen to fail: a
	// failed or panicking test, a failed creation, or the test binary's
	// -timeout. It is removed when the test passes, when the process is
	// interrupted (SIGINT, SIGTERM), and when the process dies without a
	// word (SIGKILL, a crash), since no failure was seen to debug.
	KeepOnFailure
	// KeepAlways keeps the cluster whatever the outcome.
	KeepAlways
)

// String names the policy as KINDTEST_KEEP spells it.
func (k KeepPolicy) String() string {
	switch k {
	case KeepOnFailure:
		return "on-failure"
	case KeepAlways:
		return "always"
	default:
		return "never"
	}
}

// Option configures a cluster. Options are applied in order; conflicts
// between them are reported once all have been applied.
type Option func(*config) error

type config struct {
	workers       int
	controlPlanes int // WithControlPlanes
	image         string
	prefix        string
	logger        Logger
	createTimeout time.Duration
	deleteTimeout time.Duration
	keep          KeepPolicy
	kubernetes    bool
	artifactsDir  string
	reuse         bool
	runtime       string // OCI runtime of the nodes; set only by tests
	// initWrapper is put before `kubeadm init` in the init script; set
	// only by tests, to make init fail.
	initWrapper string
	// settings are what the options of settings.go set: feature gates,
	// component flags, kubelet configuration, node labels, taints, mounts.
	settings settings
	// portMappings publish node ports of the control plane on the host
	// (WithPortMapping).
	portMappings []portMapping
	// registry and mirrors: see WithRegistry and WithRegistryMirror.
	registry bool
	mirrors  []registryMirror
	// noDefaultCNI: see WithoutDefaultCNI.
	noDefaultCNI bool
	// withoutStorage leaves out the default StorageClass (WithoutStorage).
	withoutStorage bool
	// withoutNetworkPolicy leaves out the NetworkPolicy agent
	// (WithoutNetworkPolicy).
	withoutNetworkPolicy bool
}

// Limits on user input. Each node is a full container with systemd, a
// container runtime and a kubelet; past a handful they only slow the host.
const (
	maxWorkers   = 16
	maxPrefixLen = 20
)

var prefixPattern = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

func defaultConfig() *config {
	return &config{
		image:         DefaultImage,
		controlPlanes: 1,
		prefix:        "kt",
		logger:        discard{},
		createTimeout: 5 * time.Minute,
		deleteTimeout: time.Minute,
		kubernetes:    true,
	}
}

func newConfig(opts []Option) (*config, error) {
	cfg := defaultConfig()
	if err := cfg.fromEnv(); err != nil {
		return nil, err
	}
	var errs []error
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	// Conflicts are checked even when an option failed, so that every
	// mistake is reported at once.
	if err := errors.Join(append(errs, cfg.validate())...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// fromEnv applies the environment variables a user sets without touching
// code; options given in code come after and win.
func (c *config) fromEnv() error {
	if v := getenv(envImage); v != "" {
		c.image = v
	}
	if v := getenv(envKeep); v != "" {
		k, err := parseKeep(v)
		if err != nil {
			return err
		}
		c.keep = k
	}
	if v := getenv(envReuse); v != "" {
		switch v {
		case "1", "true", "yes":
			c.reuse = true
		case "0", "false", "no":
		default:
			return fmt.Errorf("KINDTEST_REUSE=%q: want 1 or 0", v)
		}
	}
	if v := getenv(envArtifacts); v != "" {
		c.artifactsDir = v
	}
	return nil
}

func parseKeep(v string) (KeepPolicy, error) {
	switch v {
	case "never", "0", "false":
		return KeepNever, nil
	case "on-failure":
		return KeepOnFailure, nil
	case "always", "1", "true":
		return KeepAlways, nil
	}
	return KeepNever, fmt.Errorf("KINDTEST_KEEP=%q: want never, on-failure or always", v)
}

func (c *config) validate() error {
	var errs []error
	if c.workers < 0 {
		errs = append(errs, fmt.Errorf("workers: %d is negative: use 0 for a single control-plane node", c.workers))
	}
	if c.workers > maxWorkers {
		errs = append(errs, fmt.Errorf("workers: %d: at most %d are allowed, each worker being a full node container", c.workers, maxWorkers))
	}
	if c.image == "" {
		errs = append(errs, errors.New("image: empty: leave WithImage out to use "+DefaultImage))
	}
	if len(c.prefix) > maxPrefixLen {
		errs = append(errs, fmt.Errorf("name prefix %q: %d characters, at most %d", c.prefix, len(c.prefix), maxPrefixLen))
	} else if !prefixPattern.MatchString(c.prefix) {
		errs = append(errs, fmt.Errorf("name prefix %q: use lowercase letters, digits and '-', starting with a letter and not ending with '-'", c.prefix))
	}
	if c.createTimeout <= 0 {
		errs = append(errs, fmt.Errorf("create timeout %v: must be positive", c.createTimeout))
	}
	if c.deleteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("delete timeout %v: must be positive", c.deleteTimeout))
	}
	errs = append(errs, c.validateControlPlanes()...)
	errs = append(errs, c.settings.validate(c)...)
	errs = append(errs, validatePortMappings(c.portMappings)...)
	errs = append(errs, c.validateNetworking()...)
	return errors.Join(errs...)
}

// WithWorkers sets the number of worker nodes besides the one control-plane
// node. Default 0: a single node that runs workloads too.
func WithWorkers(n int) Option {
	return func(c *config) error { c.workers = n; return nil }
}

// WithImage sets the node image. Default DefaultImage, or KINDTEST_IMAGE
// when set.
func WithImage(ref string) Option {
	return func(c *config) error { c.image = ref; return nil }
}

// WithNamePrefix sets the prefix of the generated cluster name: lowercase
// letters, digits and '-', at most 20 characters. Default "kt".
func WithNamePrefix(prefix string) Option {
	return func(c *config) error { c.prefix = prefix; return nil }
}

// WithLogger sets where progress lines go. Default: the test's log in
// Start, nowhere in New.
func WithLogger(l Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("logger: nil: leave WithLogger out for the default")
		}
		c.logger = l
		return nil
	}
}

// WithCreateTimeout bounds the whole creation of a cluster. Default 5m.
func WithCreateTimeout(d time.Duration) Option {
	return func(c *config) error { c.createTimeout = d; return nil }
}

// WithDeleteTimeout bounds the removal of a cluster. Default 1m.
func WithDeleteTimeout(d time.Duration) Option {
	return func(c *config) error { c.deleteTimeout = d; return nil }
}

// WithKeep says when Start leaves the cluster in place after the test, for
// debugging; it logs the commands to inspect and delete it. Default
// KeepNever, or KINDTEST_KEEP (never, on-failure, always) when set.
func WithKeep(k KeepPolicy) Option {
	return func(c *config) error {
		if k < KeepNever || k > KeepAlways {
			return fmt.Errorf("keep policy %d: use KeepNever, KeepOnFailure or KeepAlways", k)
		}
		c.keep = k
		return nil
	}
}

// WithoutKubernetes stops the lifecycle once systemd runs on every node:
// no kubeadm, no pod network. For tests of node-level behaviour. Default:
// Kubernetes is set up.
func WithoutKubernetes() Option {
	return func(c *config) error { c.kubernetes = false; return nil }
}

// WithArtifactsDir sets where logs are exported when a test fails. Default
// $ARTIFACTS when set, else the test's temporary directory.
func WithArtifactsDir(dir string) Option {
	return func(c *config) error { c.artifactsDir = dir; return nil }
}

// WithReuse makes the cluster outlive the test for the edit-test loop: the
// first run creates and keeps it, later runs with the same configuration
// (node image, workers, Kubernetes or not, storage or not, name prefix,
// settings, port mappings, registry, mirrors, default CNI or not) attach
// to it in about a second. A cluster in use by another run is never
// attached to.
// When a run ends, its namespaces (all but default and the kube-* ones)
// and the namespaced objects it left in default are deleted; cluster-scoped
// objects and loaded images stay. Delete then releases the cluster rather
// than removing it; `kindtest delete` or `kindtest prune -all` remove it.
// Default off, or on when KINDTEST_REUSE=1.
func WithReuse() Option {
	return func(c *config) error { c.reuse = true; return nil }
}
