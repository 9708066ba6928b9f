package bootstrap

import (
	"embed"
	"encoding/json"
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

// RootCAConfigMap is the kube-root-ca.crt ConfigMap of kube-system, as
// the controller-manager's root CA publisher makes it in every namespace:
// the cluster's CA (caPEM, the controller-manager's --root-ca-file) and
// the publisher's description. Every pod's service account volume reads
// it; created with the add-ons, before their workloads, it is there when
// the kubelet first mounts kube-proxy's and CoreDNS's volumes, where the
// publisher, starting beside the DaemonSet and Deployment controllers,
// sometimes came second and the kubelet retried the mount only half a
// second later. The publisher finds it as it would have made it and
// leaves it alone.
func RootCAConfigMap(caPEM string) string {
	cm := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":        "kube-root-ca.crt",
			"namespace":   "kube-system",
			"annotations": map[string]string{"kubernetes.io/description": rootCADescription},
		},
		"data": map[string]string{"ca.crt": caPEM},
	}
	// JSON is YAML; encoding/json cannot fail on these types.
	b, _ := json.Marshal(cm)
	return string(b) + "\n"
}

// rootCADescription is the description the root CA publisher puts on
// kube-root-ca.crt (k8s.io/kubernetes pkg/controller/certificates/
// rootcacertpublisher): the publisher rewrites a ConfigMap without it.
const rootCADescription = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
	"No other usage is guaranteed across distributions of Kubernetes clusters."
