package kindtest

import (
	"context"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/imageref"
)

// Every cluster has a default StorageClass, "standard", served by Rancher's
// local-path provisioner: a PersistentVolumeClaim without storageClassName
// gets a directory on the node of the first pod that uses it, under
// StorageRoot (on the node's /var volume, so it goes with the cluster).
//
// Start does not wait for any of it: once the cluster is ready, it starts
// the apply of the provisioner's manifest on the control plane and
// returns. The StorageClass appears within about a second, the provisioner
// a few seconds later. A claim made before the class exists gets it all
// the same (Kubernetes gives the default class to claims without one when
// a default appears), and binds once the provisioner runs; the pods that
// use it stay Pending until then, so waiting for one's own pods covers it.
const (
	// StorageClassName is the name of the default StorageClass that
	// every cluster has unless WithoutStorage is given.
	StorageClassName = "standard"
	// StorageRoot is where, on the node, the default StorageClass's
	// volumes live: one directory per volume.
	StorageRoot = "/var/local-path-provisioner"
)

// Where the control plane keeps the storage manifest and the output of its
// apply (exported with the kubeadm logs).
const (
	storageManifestPath = "/etc/kindtest/storage.yaml"
	storageLog          = "/etc/kindtest/storage.log"
)

// startLateAddons starts applying the storage and NetworkPolicy manifests
// that the configuration asks for on the control plane, and returns at
// once: nothing in Start waits for them. The apply is retried, the API
// server being busy right after start.
func (c *Cluster) startLateAddons(ctx context.Context) error {
	var manifests []string
	if !c.cfg.withoutStorage {
		manifests = append(manifests, storageManifestPath)
	}
	if c.cfg.networkPolicyEnforced() {
		manifests = append(manifests, networkPolicyManifestPath)
	}
	if _, err := c.ControlPlane().run(ctx, bootstrap.LateAddonsCommand(adminKubeconfig, storageLog, manifests...)...); err != nil {
		return c.nodeError(c.ControlPlane(), "start applying the storage and network policy manifests", err)
	}
	return nil
}

// storageManifest returns the default StorageClass and its provisioner,
// all in kube-system: namespaces other than the system ones are emptied
// when a reused cluster is handed to the next run. The provisioner runs
// from the image preloaded in the node image, which also has the shell and
// coreutils its helper pods run to create and remove volume directories.
// Like CoreDNS, it reaches the API server at apiHost:apiPort rather than
// through the kubernetes Service: started before kube-proxy has programmed
// that Service, it would fail its first start and be restarted.
func storageManifest(apiHost string, apiPort int) string {
	return bootstrap.StorageAddon{
		Image: imageref.LocalPathProvisioner, Class: StorageClassName, Root: StorageRoot, APIHost: apiHost, APIPort: apiPort,
	}.Manifest()
}
