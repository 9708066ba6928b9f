package bootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Object is one Kubernetes object of a manifest, ready to be created with
// a POST of Body (JSON) to Path, its collection in the API.
type Object struct {
	Kind, Namespace, Name string
	Path                  string
	Body                  []byte
}

// resources are the plural names of the kinds the add-on manifests hold,
// by apiVersion and kind.
var resources = map[string]string{
	"v1/ConfigMap":      "configmaps",
	"v1/Service":        "services",
	"v1/ServiceAccount": "serviceaccounts",
	"rbac.authorization.k8s.io/v1/ClusterRole":        "clusterroles",
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": "clusterrolebindings",
	"rbac.authorization.k8s.io/v1/Role":               "roles",
	"rbac.authorization.k8s.io/v1/RoleBinding":        "rolebindings",
	"apps/v1/DaemonSet":                               "daemonsets",
	"apps/v1/Deployment":                              "deployments",
}

// workloads are created after everything else: their pods need the service
// accounts, config maps and roles to exist, and a pod refused for a
// missing service account is retried only after a backoff.
var workloads = []string{"DaemonSet", "Deployment"}

// Objects splits YAML manifests (documents separated by ---) into the
// objects to create, workloads last, the rest in manifest order. Only
// the kinds of kubeadm's kube-proxy and CoreDNS add-ons are known.
func Objects(manifests string) ([]Object, error) {
	var objs, later []Object
	err := EachDocument(manifests, func(doc map[string]any) error {
		o, err := object(doc)
		if err != nil {
			return err
		}
		if slices.Contains(workloads, o.Kind) {
			later = append(later, o)
		} else {
			objs = append(objs, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("manifest %w", err)
	}
	return append(objs, later...), nil
}

func object(doc map[string]any) (Object, error) {
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	meta, _ := doc["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	plural, ok := resources[apiVersion+"/"+kind]
	if !ok || name == "" {
		return Object{}, fmt.Errorf("%s %q (apiVersion %q): not a kind kindtest creates", kind, name, apiVersion)
	}
	path := "/api/v1"
	if strings.Contains(apiVersion, "/") {
		path = "/apis/" + apiVersion
	}
	if ns != "" {
		path += "/namespaces/" + ns
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return Object{}, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return Object{Kind: kind, Namespace: ns, Name: name, Path: path + "/" + plural, Body: body}, nil
}

// EachDocument decodes the YAML (or JSON) documents of text, separated by
// ---, and calls fn with each one that is not empty; it stops at the
// first error, naming the document by its number, counting from 1.
func EachDocument(text string, fn func(doc map[string]any) error) error {
	dec := yaml.NewDecoder(strings.NewReader(text))
	for n := 1; ; n++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil && doc != nil {
			err = fn(doc)
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", n, err)
		}
	}
}
