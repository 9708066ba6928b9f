package images

import (
	"fmt"
	"regexp"
)

// WithKubernetesVersion builds the node image for Kubernetes version v, a
// release given as vMAJOR.MINOR.PATCH (such as v1.36.3). The image is
// tagged kindtest/node:<v> and kindtest/node:<v>-<hash> and labelled with v.
// Default: DefaultKubernetesVersion, the version images/kubernetes/go.mod
// requires.
//
// For any other version Build derives, in its cache directory, the nested
// modules that build Kubernetes, and etcd and CoreDNS at the versions that
// version's kubeadm expects; the checked-in modules stay as they are. That
// needs the Go module proxy (or a module cache that holds those versions).
func WithKubernetesVersion(v string) BuildOption {
	return func(c *buildConfig) error {
		if err := validateKubernetesVersion(v); err != nil {
			return fmt.Errorf("WithKubernetesVersion: %w", err)
		}
		c.kubernetesVersion = v
		return nil
	}
}

var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// validateKubernetesVersion accepts a Kubernetes release version,
// v1.MINOR.PATCH; pre-releases and build metadata are refused.
func validateKubernetesVersion(v string) error {
	m := releaseVersion.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("version %q is not a Kubernetes release of the form vMAJOR.MINOR.PATCH (such as %s)", v, DefaultKubernetesVersion)
	}
	if m[1] != "1" {
		return fmt.Errorf("version %q: Kubernetes releases are v1.MINOR.PATCH", v)
	}
	return nil
}
