// Package bootstrap renders what kindtest sends to a node to make it part
// of a cluster: kubeadm's init and join configurations, with the kubelet's
// and kube-proxy's, the pod network's CNI configuration, and the CoreDNS
// manifests fitted to a test cluster.
//
// Everything here is data in, text out: the package takes plain values
// (names, addresses, flags, durations) and knows nothing of containers or
// clusters; kindtest decides what the values are and runs the results.
// The configurations are text/template over the config structs below
// (kubeadm.tmpl) or marshalled from data (the kubelet configuration as
// YAML, the CNI configuration as JSON), and the CoreDNS manifests are
// edited as parsed YAML.
package bootstrap
