package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A node's system pods share one containerd shim. containerd starts a
// runc shim, a Go process of about 5 MiB, for every pod sandbox: eight on
// a control plane at rest, 41 MiB. The runc shim puts a container whose
// OCI spec has the annotation ShimGroupAnnotation into the shim of that
// group instead, and the node image's containerd copies that annotation
// from a pod to its sandbox's and containers' specs (pod_annotations in
// images/node/containerd.toml). kindtest's own pods carry it with the
// value SystemShimGroup: the control plane's static pods (through the
// kubeadm patches ShimGroupPatches), kube-proxy, CoreDNS (GroupShims),
// the storage provisioner and the NetworkPolicy agent (their manifests).
// A test's pods do not, and keep a shim each. A node image without
// pod_annotations ignores the annotation: every pod has its own shim.
const (
	ShimGroupAnnotation = "io.containerd.runc.v2.group"
	SystemShimGroup     = "kube-system"
)

// KubeadmPatchesDir is the directory of the kubeadm patches a control
// plane's configuration names: kubeadm applies them to the static pod
// manifests it writes.
const KubeadmPatchesDir = "/etc/kindtest/kubeadm-patches"

// ShimGroupPatches are the kubeadm patches, for KubeadmPatchesDir, that
// put the control plane's static pods in the system shim group.
func ShimGroupPatches() []File {
	var files []File
	for _, target := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		files = append(files, File{
			Path:    path.Join(KubeadmPatchesDir, target+"+strategic.yaml"),
			Content: fmt.Sprintf("metadata:\n  annotations:\n    %s: %s\n", ShimGroupAnnotation, SystemShimGroup),
		})
	}
	return files
}

// GroupShims puts the pods of every Deployment and DaemonSet in manifests
// in the system shim group: it adds the annotation to their pod
// templates. The manifests are edited as parsed YAML; the documents keep
// their order.
func GroupShims(manifests string) (string, error) {
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("add-on manifests: %w", err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		if kind := lookup(doc.Content[0], "kind"); kind != nil && (kind.Value == "Deployment" || kind.Value == "DaemonSet") {
			if err := groupShim(doc.Content[0]); err != nil {
				return "", err
			}
		}
		if err := enc.Encode(&doc); err != nil {
			return "", fmt.Errorf("add-on manifests: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("add-on manifests: %w", err)
	}
	return b.String(), nil
}

// groupShim annotates the pod template of the workload w.
func groupShim(w *yaml.Node) error {
	template := lookup(lookup(w, "spec"), "template")
	if template == nil || template.Kind != yaml.MappingNode {
		return fmt.Errorf("add-on %s %s has no pod template", lookup(w, "kind").Value, name(w))
	}
	meta := lookup(template, "metadata")
	if meta == nil || meta.Kind != yaml.MappingNode {
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		set(template, "metadata", meta)
	}
	annotations := lookup(meta, "annotations")
	if annotations == nil || annotations.Kind != yaml.MappingNode {
		annotations = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		set(meta, "annotations", annotations)
	}
	set(annotations, ShimGroupAnnotation, scalar("!!str", SystemShimGroup))
	return nil
}

// name is the workload w's metadata.name, "" when it has none.
func name(w *yaml.Node) string {
	if n := lookup(lookup(w, "metadata"), "name"); n != nil {
		return n.Value
	}
	return ""
}
