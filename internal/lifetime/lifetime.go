// Package lifetime is the one home of what decides whether a kindtest
// cluster outlives the process that made it: every label key kindtest
// writes (on engine objects, images and Kubernetes objects), the keep
// values, and the single rule that the library
// (at the end of a test, on a signal, at the test binary's deadline), the
// orphan sweep and the reaper all apply.
//
// The rule, in one place (Outlives):
//   - keep "never" (the default): removed however the owner ends.
//   - keep "always": kept however the owner ends, until deleted by hand.
//   - keep "on-failure": kept only when the owner saw its test fail (a
//     failed or panicking test, or the test binary's -timeout), and then
//     marked "kept" on the engine; removed when the owner passed, was
//     interrupted (SIGINT, SIGTERM) or vanished without a word (SIGKILL, a
//     crash), since nobody saw a failure to debug.
//   - keep "reuse": kept once the cluster is complete and marked "kept";
//     a half-made reusable cluster is removed like a "never" one.
//   - whatever the keep value: removed when the owner deletes it.
//
// Labels cannot change once a resource exists, so a decision to keep is
// recorded by adding a small marker volume, labelled with the cluster and
// keep "kept". A cluster outlives its owner when any of its resources says
// so.
package lifetime

import (
	"fmt"
	"regexp"
	"strings"
)

// All of kindtest's label keys name one namespace, kindtest.dev, each in
// the convention of the system that holds the label: Docker's
// reverse-DNS form ("dev.kindtest.") on containers, networks, volumes,
// images and containerd's images; Kubernetes' prefix form
// ("kindtest.dev/") on Kubernetes objects.

// Label keys on every container, network and volume kindtest creates.
const (
	LabelCluster    = "dev.kindtest.cluster"
	LabelSession    = "dev.kindtest.session"
	LabelRole       = "dev.kindtest.role"
	LabelNodeIndex  = "dev.kindtest.node-index"
	LabelOwnerHost  = "dev.kindtest.owner.host"
	LabelOwnerPID   = "dev.kindtest.owner.pid"
	LabelOwnerStart = "dev.kindtest.owner.start"
	LabelCreated    = "dev.kindtest.created"
	LabelKeep       = "dev.kindtest.keep"
	LabelReuse      = "dev.kindtest.reuse"
	// LabelPool holds the id of the pool (kindtest pool) that made a
	// cluster, and LabelShape its shape (the hash reuse also matches by).
	LabelPool  = "dev.kindtest.pool"
	LabelShape = "dev.kindtest.shape"
	// RoleClaim is the role of the claim record, a container that is
	// created and never started, named after the cluster it claims from a
	// pool: its name makes the claim atomic (the engine refuses a second
	// container of that name), its labels say whose the cluster is now
	// (session, owner, keep), which the sweep and the reaper go by instead
	// of the pool's labels on the cluster's other objects.
	RoleClaim = "claim"
	// LabelReaper marks reaper containers; they carry no cluster label.
	LabelReaper = "dev.kindtest.reaper"
)

// Label keys on images, and on what builds them.
const (
	// LabelImageContentHash holds the hash of a node image's inputs.
	LabelImageContentHash = "dev.kindtest.image.content-hash"
	// LabelImageKubernetesVersion holds the Kubernetes version in a node
	// image.
	LabelImageKubernetesVersion = "dev.kindtest.image.kubernetes-version"
	// LegacyLabelImageKubernetesVersion is LabelImageKubernetesVersion on
	// node images built before the keys moved into one namespace; it is
	// still read when the new key is missing.
	LegacyLabelImageKubernetesVersion = "io.kindtest.kubernetes-version"
	// LabelImageKubernetesPatches lists, comma-separated, the timing
	// patches a node image's Kubernetes carries ("none" for a stock
	// build).
	LabelImageKubernetesPatches = "dev.kindtest.image.kubernetes-patches"
	// LabelImageBinaryHash holds the SHA-256 of the one binary of a small
	// image (the reaper, the registry, the load balancer).
	LabelImageBinaryHash = "dev.kindtest.image.binary-hash"
	// LabelBuild marks the containers and volume of a node image build,
	// for a sweep after a killed build.
	LabelBuild = "dev.kindtest.build"
	// LabelImageID is the containerd label LoadImage puts on the images it
	// imports into a node: the Docker image ID it came from.
	LabelImageID = "dev.kindtest.image-id"
	// LabelTestEngine marks the containers and volumes of the project's
	// own test engines (internal/enginetest).
	LabelTestEngine = "dev.kindtest.test-engine"
)

// Label and annotation keys on Kubernetes objects.
const (
	// KubeLabelCluster and KubeLabelSession are on the namespaces that
	// Namespace makes: the cluster's name and the session.
	KubeLabelCluster = "kindtest.dev/cluster"
	KubeLabelSession = "kindtest.dev/session"
	// KubeLabelNodeIndex is on every Kubernetes node: its index in the
	// cluster (0 is the first control plane).
	KubeLabelNodeIndex = "kindtest.dev/node-index"
	// KubeAnnotationTest is on the namespaces that Namespace makes: the
	// full name of the test they were made for.
	KubeAnnotationTest = "kindtest.dev/test"
)

// ImageKubernetesVersion reads the Kubernetes version from a node image's
// labels, under the current key or the legacy one; "" when neither is there.
func ImageKubernetesVersion(labels map[string]string) string {
	if v := labels[LabelImageKubernetesVersion]; v != "" {
		return v
	}
	return labels[LegacyLabelImageKubernetesVersion]
}

// Keep values of LabelKeep.
const (
	KeepNever     = "never"
	KeepOnFailure = "on-failure"
	KeepAlways    = "always"
	KeepReuse     = "reuse"
	// Kept is the keep value of the marker volume that records a decision
	// to keep a cluster made after it was created.
	Kept = "kept"
)

// Outcome is how the owner of a cluster ended, or is ending.
type Outcome int

const (
	// Passed: the test finished normally.
	Passed Outcome = iota
	// Failed: the test failed or panicked, creation failed, or the test
	// binary's -timeout is about to end the process.
	Failed
	// Interrupted: the process got SIGINT or SIGTERM.
	Interrupted
	// Vanished: the process is gone without saying how (SIGKILL, a crash,
	// os.Exit): what the reaper and the orphan sweep see.
	Vanished
	// Deleted: the owner asked for the cluster's removal (Delete):
	// nothing outlives that.
	Deleted
)

// String names the outcome for log lines.
func (o Outcome) String() string {
	switch o {
	case Passed:
		return "passed"
	case Failed:
		return "failed"
	case Interrupted:
		return "interrupted"
	case Deleted:
		return "deleted"
	default:
		return "vanished"
	}
}

// Outlives reports whether a cluster whose resources carry the given keep
// values outlives an owner that ended with outcome o. It is the only place
// that rule is written.
func Outlives(keeps []string, o Outcome) bool {
	if o == Deleted {
		return false
	}
	for _, k := range keeps {
		switch k {
		case KeepAlways, Kept:
			return true
		case KeepOnFailure:
			if o == Failed {
				return true
			}
		}
	}
	return false
}

// MarkerVolume names the volume that records that a cluster is kept.
func MarkerVolume(cluster string) string { return cluster + "-kept" }

var clusterName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// CheckClusterName refuses a name that could not be a kindtest cluster's:
// above all an empty or blank one, which as a label filter would match
// every cluster on the engine.
func CheckClusterName(name string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("cluster name is empty: name a cluster (see `kindtest list`)")
	}
	if len(name) > 63 || !clusterName.MatchString(name) {
		return fmt.Errorf("cluster name %q is not a kindtest cluster name (lowercase letters, digits and '-'; see `kindtest list`)", name)
	}
	return nil
}
