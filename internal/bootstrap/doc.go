// Package bootstrap renders what kindtest sends to a node to make it part
// of a cluster: kubeadm's init and join configurations (with the kubelet's
// and kube-proxy's), the pod network's CNI configuration, containerd's
// registry host configuration, the CoreDNS manifests fitted to a test
// cluster, the manifests of the late add-ons (storage provisioner,
// NetworkPolicy agent), and the shell scripts kindtest runs in nodes: before and while
// they boot, and later (the late add-ons, image import, a reused
// cluster's clean-up, waiting for a Job, a node's memory use).
//
// Everything here is data in, text out: the package takes plain values
// (names, addresses, flags, durations) and knows nothing of containers or
// clusters; kindtest decides what the values are and runs the results.
// The configurations are text/template over the config structs below or
// marshalled from data (the kubelet configuration as YAML, the CNI
// configuration as JSON), the CoreDNS manifests are edited as parsed
// YAML, and the scripts are files of this package (scripts/*.sh, run with
// the shell their #! line names) that shellcheck checks.
package bootstrap
