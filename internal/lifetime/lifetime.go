// Package lifetime is the one home of what decides whether a kindtest
// cluster outlives the process that made it: the label keys every
// resource carries, the keep values, and the single rule that the library
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

// Label keys on every container, network and volume kindtest creates, all
// in one namespace.
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
	// LabelReaper marks reaper containers; they carry no cluster label.
	LabelReaper = "dev.kindtest.reaper"
)

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
	// Passed: the test (or the caller of Delete) finished normally.
	Passed Outcome = iota
	// Failed: the test failed or panicked, creation failed, or the test
	// binary's -timeout is about to end the process.
	Failed
	// Interrupted: the process got SIGINT or SIGTERM.
	Interrupted
	// Vanished: the process is gone without saying how (SIGKILL, a crash,
	// os.Exit): what the reaper and the orphan sweep see.
	Vanished
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
	default:
		return "vanished"
	}
}

// Outlives reports whether a cluster whose resources carry the given keep
// values outlives an owner that ended with outcome o. It is the only place
// that rule is written.
func Outlives(keeps []string, o Outcome) bool {
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
