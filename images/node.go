package images

import (
	"context"
	"path/filepath"
)

// buildRef is the node image before its component images are loaded.
func (b *builder) buildRef() string {
	return "kindtest/node-build:" + b.res.KubernetesVersion + "-" + b.res.ContentHash[:hashLength]
}

// nodeImage builds the node image (without preloaded images) from
// node/Dockerfile on the node base.
func (b *builder) nodeImage(ctx context.Context) error {
	baseRef, _, err := nodeBase.ref(b.cfg.sourceDir, b.platform)
	if err != nil {
		return err
	}
	nodeDir := filepath.Join(b.cfg.sourceDir, "node")
	files, err := dirFiles(nodeDir, "node/")
	if err != nil {
		return err
	}
	files = append(files, tarFile{name: "Dockerfile", path: filepath.Join(nodeDir, "Dockerfile")})
	for _, name := range []string{"kubelet", "kubeadm", "kubectl", "containerd", "containerd-shim-runc-v2", "ctr"} {
		files = append(files, tarFile{name: "bin/" + name, path: filepath.Join(b.binDir, name), mode: 0o755})
	}
	return b.buildImage(ctx, files, b.buildRef(), map[string]string{
		"BASE_IMAGE":         baseRef,
		"KUBERNETES_VERSION": b.res.KubernetesVersion,
		"CONTENT_HASH":       b.res.ContentHash,
		"KUBERNETES_PATCHES": patchNames(b.patches),
	})
}
