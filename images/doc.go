// Package images builds the kindtest node image from this repository, with
// no container registry: a Debian bookworm base made with mmdebstrap, the
// Kubernetes, containerd, etcd, CoreDNS, pause, local-path provisioner and
// kube-network-policies binaries built from Go modules on the host, one
// image per cluster component tagged as kubeadm names it (the provisioner
// as LocalPathProvisionerImage, the NetworkPolicy agent as
// NetworkPoliciesImage), and the node image with those component images
// already loaded into its containerd.
//
// The inputs live beside this file: base/packages.txt (the Debian packages),
// node/ (Dockerfile, entrypoint, containerd configuration, systemd units)
// and one nested Go module per program (kubernetes/, containerd/, etcd/,
// coredns/, pause/, local-path-provisioner/, network-policies/), which the
// library's own go.mod never sees. Build hashes those inputs, and an image whose content-derived
// tag already exists is not built again.
//
// The Kubernetes version is one build parameter (WithKubernetesVersion),
// carried by the image tag and label. For a version other than the one
// images/kubernetes requires, Build derives the nested modules for it in its
// cache directory, with etcd and CoreDNS at the versions that version's
// kubeadm expects.
package images
