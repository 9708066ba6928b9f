package kindtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

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
)

// Owner identifies the process that created a cluster: host name, PID and
// the process's start time, so that a recycled PID is not taken for the
// owner.
type Owner struct {
	Host  string
	PID   int
	Start string
}

// String formats the owner as host/pid.
func (o Owner) String() string { return fmt.Sprintf("%s/%d", o.Host, o.PID) }

var (
	sessionOnce sync.Once
	sessionID   string
	selfOwner   Owner
)

// Session returns this process's session id: KINDTEST_SESSION when set, else
// a random id made once per process. Every resource the process creates is
// labelled with it. Set KINDTEST_SESSION to group the clusters of several
// processes (a CI job's, say) under one label value for your own tooling;
// ownership stays per process: each process has its own reaper, which
// removes only the clusters that process registered with it.
func Session() string {
	initSession()
	return sessionID
}

func self() Owner {
	initSession()
	return selfOwner
}

func initSession() {
	sessionOnce.Do(func() {
		sessionID = getenv(envSession)
		if sessionID == "" {
			sessionID = strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
		}
		host, _ := os.Hostname()
		start, _ := lifetime.ProcessStart(os.Getpid())
		selfOwner = Owner{Host: host, PID: os.Getpid(), Start: start}
	})
}

// ownerAlive reports whether the process o still runs on this host. An owner
// on another host is assumed alive: only its own host can tell.
func ownerAlive(o Owner) bool { return lifetime.OwnerAlive(o.Host, o.PID, o.Start) }

func ownerFromLabels(l map[string]string) Owner {
	pid, _ := strconv.Atoi(l[LabelOwnerPID])
	return Owner{Host: l[LabelOwnerHost], PID: pid, Start: l[LabelOwnerStart]}
}

// newClusterName makes a short, unique, DNS-label-safe name: the prefix and
// eight hex digits of a random UUID.
func newClusterName(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
}

// nodeName names node index i of a cluster: index 0 is the control plane.
func nodeName(cluster string, i int) string {
	if i == 0 {
		return cluster + "-control-plane"
	}
	if i == 1 {
		return cluster + "-worker"
	}
	return fmt.Sprintf("%s-worker%d", cluster, i)
}

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
