// The labels on everything kindtest creates: the keys, and the labels of
// a cluster's resources and nodes.

package kindtest

import (
	"strconv"
	"time"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// Label keys on every container, network and volume kindtest creates.
// Listing, deleting and sweeping all go by these labels; there is no local
// state file.
const (
	LabelCluster    = lifetime.LabelCluster
	LabelSession    = lifetime.LabelSession
	LabelRole       = lifetime.LabelRole
	LabelNodeIndex  = lifetime.LabelNodeIndex
	LabelOwnerHost  = lifetime.LabelOwnerHost
	LabelOwnerPID   = lifetime.LabelOwnerPID
	LabelOwnerStart = lifetime.LabelOwnerStart
	LabelCreated    = lifetime.LabelCreated
	// LabelKeep holds the cluster's keep policy (never, on-failure, always
	// or reuse), or "kept" on the marker volume of a cluster kept after a
	// failure. See KeepPolicy for when a cluster outlives its test.
	LabelKeep = lifetime.LabelKeep
	// LabelReuse holds the configuration hash of a reusable cluster.
	LabelReuse = lifetime.LabelReuse
	// LabelPool holds the id of the pool that made a cluster (NewPool),
	// and LabelShape that cluster's shape, the hash reuse matches by too.
	LabelPool  = lifetime.LabelPool
	LabelShape = lifetime.LabelShape
	// LabelReaper marks reaper containers.
	LabelReaper = lifetime.LabelReaper
)

// Label keys on the namespaces Namespace makes: Kubernetes objects carry
// kindtest's keys in Kubernetes' prefix form.
const (
	NamespaceLabelCluster = lifetime.KubeLabelCluster
	NamespaceLabelSession = lifetime.KubeLabelSession
)

// Node roles.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
	// RoleClaim is the role of a claim record: a container, never
	// started, that says whose a cluster claimed from a pool is.
	RoleClaim = lifetime.RoleClaim
)

// clusterLabels are the labels every resource of the cluster carries.
func clusterLabels(cluster string, created time.Time, keep string) map[string]string {
	o := self()
	return map[string]string{
		LabelCluster:    cluster,
		LabelSession:    Session(),
		LabelOwnerHost:  o.Host,
		LabelOwnerPID:   strconv.Itoa(o.PID),
		LabelOwnerStart: o.Start,
		LabelCreated:    created.UTC().Format(time.RFC3339),
		LabelKeep:       keep,
	}
}

// nodeLabels adds the node's role and index to the cluster labels.
func nodeLabels(base map[string]string, role string, index int) map[string]string {
	l := make(map[string]string, len(base)+2)
	for k, v := range base {
		l[k] = v
	}
	l[LabelRole] = role
	l[LabelNodeIndex] = strconv.Itoa(index)
	return l
}

func ownerFromLabels(l map[string]string) Owner {
	pid, _ := strconv.Atoi(l[LabelOwnerPID])
	return Owner{Host: l[LabelOwnerHost], PID: pid, Start: l[LabelOwnerStart]}
}
