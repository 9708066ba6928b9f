package bootstrap

import (
	"embed"
	"text/template"
)

// addonManifests are the add-ons kindtest applies once the cluster is
// ready (the late add-ons): the storage provisioner and the NetworkPolicy
// agent, as text/template over their values.
//
//go:embed manifests/*.yaml
var addonManifests embed.FS

var addonTemplates = template.Must(template.New("").Option("missingkey=error").ParseFS(addonManifests, "manifests/*.yaml"))

// StorageAddon are the values of the default StorageClass and its
// provisioner (Rancher's local-path provisioner), all in kube-system.
type StorageAddon struct {
	// Image is the provisioner's image, preloaded in the node image; its
	// helper pods run from it too.
	Image string
	// Class is the StorageClass's name, marked as the default class.
	Class string
	// Root is the directory on the node under which volumes are made.
	Root string
	// APIHost and APIPort are where the provisioner reaches the API
	// server, rather than through the kubernetes Service, which kube-proxy
	// may not have programmed yet when it starts.
	APIHost string
	APIPort int
}

// Manifest is the StorageClass, the provisioner's ServiceAccount, RBAC,
// configuration and Deployment.
func (a StorageAddon) Manifest() string { return render(addonTemplates, "storage.yaml", a) }

// NetworkPolicyAddon are the values of the NetworkPolicy agent
// (kube-network-policies), a DaemonSet in kube-system.
type NetworkPolicyAddon struct {
	// Image is the agent's image, preloaded in the node image.
	Image string
	// Name is the DaemonSet's name, and that of its ServiceAccount and
	// (prefixed "kindtest:") its RBAC objects.
	Name string
	// APIHost and APIPort: as for StorageAddon.
	APIHost string
	APIPort int
}

// Manifest is the agent's ServiceAccount, RBAC and DaemonSet.
func (a NetworkPolicyAddon) Manifest() string {
	return render(addonTemplates, "network-policy.yaml", a)
}
