// Package imageref names the images kindtest runs and the Kubernetes
// version of its default node image. It is the one place both the runtime
// library (kindtest) and the image builder (images) take them from, so
// that a test binary that imports kindtest does not link the builder.
//
// The node image's content hash (images/hash.go) covers the references
// of the component images preloaded into it, so that a change here that
// changes the node image's content rebuilds it.
package imageref

import (
	"path"
	"strings"
)

// KubernetesVersion is the Kubernetes version of the default node image:
// the one images/kubernetes/go.mod builds (a test in images keeps them
// equal).
const KubernetesVersion = "v1.37.2"

// Node is the default node image.
const Node = "kindtest/node:" + KubernetesVersion

// Reaper is the reaper image; its tag is the reaper protocol's version.
const Reaper = "kindtest/reaper:v3"

// Registry is the image of a cluster's registry (WithRegistry); its tag
// is the version of the distribution registry inside.
const Registry = "kindtest/registry:v3.1.2"

// RegistryPort is where the registry listens inside its container.
const RegistryPort = 5000

// LoadBalancer is the image of the load balancer in front of several
// control planes (WithControlPlanes); its tag is the version of the
// `kindtest lb` command's flags.
const LoadBalancer = "kindtest/lb:v1"

// LocalPathProvisionerVersion and NetworkPoliciesVersion are the versions
// of the components preloaded into every node image beside those kubeadm
// expects: Rancher's local-path provisioner (the default StorageClass)
// and kube-network-policies (the NetworkPolicy agent). Tests in images
// keep them equal to what their nested modules require.
const (
	LocalPathProvisionerVersion = "v0.0.30"
	NetworkPoliciesVersion      = "v0.8.0"
)

// LocalPathProvisioner and NetworkPolicies are the images of those
// components. The host name is reserved (RFC 2606): they are never
// pulled, only preloaded.
const (
	LocalPathProvisioner = "kindtest.invalid/local-path-provisioner:" + LocalPathProvisionerVersion
	NetworkPolicies      = "kindtest.invalid/kube-network-policies:" + NetworkPoliciesVersion
)

// Beside is where `kindtest build --push` puts image for a node image
// pushed as nodeRef, and where kindtest pulls it from: in the same
// registry path, under the last element of image's name with its tag
// (registry.example.com/team/kindtest/reaper:v3 for the reaper and
// registry.example.com/team/kindtest/node:v1.37.2).
func Beside(nodeRef, image string) string {
	repo := nodeRef
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return path.Dir(repo) + "/" + path.Base(image)
}
