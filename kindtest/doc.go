// Package kindtest gives each Go test suite its own real Kubernetes cluster
// whose nodes are Docker containers, and removes every trace of it
// afterwards however the run ends.
//
// In a test, Start creates a cluster and registers its removal with the
// test's cleanup before anything exists:
//
//	cluster := kindtest.Start(t, kindtest.WithWorkers(2))
//	res, err := cluster.Kubectl(t.Context(), "get", "nodes")
//
// New and (*Cluster).Delete do the same for TestMain, Ginkgo's
// SynchronizedBeforeSuite and other callers; Attach gives another process a
// handle on an existing cluster.
//
// A cluster is made in phases, each named by a Phase constant, in the
// progress log and in (*Cluster).Timings: sweep (clusters whose owner is
// gone are removed), reaper (the cluster is registered with the engine's
// reaper), network, containers, provision (before systemd boots: /sys
// read-only, cgroups, machine id, registry hosts, pod network, kubeadm's
// files), boot (systemd), and with Kubernetes init (kubeadm init, beside
// boot), kubeconfig, join (the other nodes), ready (every node and CoreDNS
// Ready; "api server" instead with WithoutDefaultCNI) and late add-ons
// (the storage provisioner and the NetworkPolicy agent, applied in the
// background: not waited for).
//
// # Environment
//
// Options given in code win over these variables.
//
//	KINDTEST_IMAGE    node image (default DefaultImage)
//	KINDTEST_KEEP     never, on-failure or always: when a cluster outlives its
//	                  test (default never; see KeepPolicy)
//	KINDTEST_REUSE    1 for reuse mode (see WithReuse)
//	ARTIFACTS         where logs are exported when a test fails (default the
//	                  test's temporary directory)
//	KINDTEST_REAPER   off: no reaper container; clusters of a killed process
//	                  are then removed by the next run's sweep or by
//	                  `kindtest prune`
//	KINDTEST_SESSION  the session label of this process's clusters (default
//	                  random per process), to group the clusters of several
//	                  processes for your own tooling
//	KINDTEST_POOL     the pool (NewPool, `kindtest pool`) that New and Start
//	                  claim a ready cluster of their shape from, instead of
//	                  making one; set by the pool for the command it runs
//	CI                when set, a missing Docker engine fails tests instead of
//	                  skipping them
//	DOCKER_HOST, DOCKER_CONTEXT, DOCKER_CONFIG
//	                  which engine, as for the docker CLI
package kindtest
