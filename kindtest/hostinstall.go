package kindtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/poll"
)

// installTimeout bounds Install's wait, when ctx has no earlier deadline.
const installTimeout = 2 * time.Minute

// hostObject is one document Install applies, as it will be applied.
type hostObject struct {
	file  string
	kind  string
	name  string
	doc   map[string]any
	crd   *crd   // for a CustomResourceDefinition
	probe string // for a webhook configuration: its probe's label value
	// conversion is set for a CRD converted by the server.
	conversion bool
	resource   string // kubectl's name for its resource type
}

// Install applies the webhook configurations, CRDs and APIServices in
// paths (files or directories, YAML or JSON, as for InstallCRDs) with
// their calls pointed at this server, and returns once the API server
// uses them:
//
//   - ValidatingWebhookConfiguration and MutatingWebhookConfiguration
//     (admissionregistration.k8s.io/v1): each webhook's clientConfig
//     becomes URL(path), where path is that of its clientConfig's service
//     or url ("/" without one), with CABundle. One webhook is added to
//     each configuration, matching only a labelled ConfigMap that Install
//     creates in namespace default until the API server calls it: then
//     the configuration is in force, as the Kubernetes e2e framework
//     checks it.
//   - CustomResourceDefinition (apiextensions.k8s.io/v1): with
//     spec.conversion.strategy Webhook, its clientConfig is rewritten the
//     same way; every CRD is waited for as InstallCRDs waits.
//   - APIService (apiregistration.k8s.io/v1): spec.service becomes the
//     server's Service (see Service) with CABundle; it is waited for until
//     it is Available.
//
// Anything else is refused, naming the file and the kind, before
// anything is applied. Close removes the webhook configurations and
// APIServices Install applied; CRDs stay, with conversion None.
func (s *HostServer) Install(ctx context.Context, paths ...string) error {
	objs, err := s.readObjects(paths)
	if err != nil {
		return fmt.Errorf("kindtest: cluster %s: install for %s: %w", s.c.name, s.Addr(), err)
	}
	if err := s.c.usable("install for the host server"); err != nil {
		return fmt.Errorf("kindtest: %w", err)
	}
	if err := s.install(ctx, objs); err != nil {
		return fmt.Errorf("kindtest: cluster %s: install for %s: %w", s.c.name, s.Addr(), err)
	}
	return nil
}

func (s *HostServer) install(ctx context.Context, objs []hostObject) error {
	var manifests bytes.Buffer
	for _, o := range objs {
		b, err := json.Marshal(o.doc)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", o.file, o.kind, o.name, err)
		}
		manifests.Write(b)
		manifests.WriteByte('\n')
	}
	s.mu.Lock()
	for _, o := range objs {
		if o.crd == nil || o.conversion {
			s.installed = append(s.installed, installedObject{resource: o.resource, name: o.name, conversion: o.conversion})
		}
	}
	s.mu.Unlock()
	if _, err := s.c.KubectlInput(ctx, &manifests, "apply", "--server-side", "--force-conflicts", "--field-manager=kindtest", "-f", "-"); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, installTimeout)
		defer cancel()
	}
	api, err := newAPIClient(s.c.kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	for _, o := range objs {
		switch {
		case o.crd != nil:
			err = waitCRDServed(ctx, api, *o.crd)
		case o.kind == "APIService":
			err = waitAPIServiceAvailable(ctx, api, o)
		default:
			err = s.waitWebhookCalled(ctx, api, o)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// waitAPIServiceAvailable waits until APIService o is Available.
func waitAPIServiceAvailable(ctx context.Context, api *apiClient, o hostObject) error {
	if conds, err := waitCondition(ctx, api, "/apis/apiregistration.k8s.io/v1/apiservices/"+o.name, "Available"); err != nil {
		return fmt.Errorf("%s: APIService %s not Available (%v): is the handler serving its discovery (GET /apis/GROUP/VERSION)? Conditions: %s", o.file, o.name, err, conds)
	}
	return nil
}

// waitWebhookCalled creates the probe ConfigMap of webhook configuration
// o until the API server calls its probe webhook, which denies it.
func (s *HostServer) waitWebhookCalled(ctx context.Context, api *apiClient, o hostObject) error {
	const cmPath = "/api/v1/namespaces/" + hostServerNamespace + "/configmaps"
	want := probeDenial + s.probe + o.probe
	var last error
	n := 0
	err := poll.Until(ctx, 20*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
		n++
		name := fmt.Sprintf("kindtest-probe-%s-%d", o.probe, n)
		cm := map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "labels": map[string]any{probeLabel: o.probe}},
		}
		last = api.do(ctx, http.MethodPost, cmPath, cm, nil)
		if last == nil {
			// Created: the configuration is not in force yet.
			_ = api.do(ctx, http.MethodDelete, cmPath+"/"+name, nil, nil)
			return false, nil
		}
		return strings.Contains(last.Error(), want), nil
	})
	if err != nil {
		return fmt.Errorf("%s: %s %s: the API server did not call its webhooks at %s (%v; last answer: %v)", o.file, o.kind, o.name, s.Addr(), err, last)
	}
	return nil
}

// probeLabel marks the ConfigMap that Install's probe webhooks match.
const probeLabel = "kindtest.io/webhook-probe"

// readObjects reads the documents of paths and points them at s.
func (s *HostServer) readObjects(paths []string) ([]hostObject, error) {
	files, err := manifestFiles(paths, "webhook configuration, CRD or APIService")
	if err != nil {
		return nil, err
	}
	var out []hostObject
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		n := len(out)
		err = bootstrap.EachDocument(string(b), func(doc map[string]any) error {
			o, err := s.pointAt(doc)
			if err != nil {
				return err
			}
			o.file = f
			key := o.kind + "/" + o.name
			if prev, ok := seen[key]; ok {
				return fmt.Errorf("%s %s is also in %s: give each once", o.kind, o.name, prev)
			}
			seen[key] = f
			out = append(out, o)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no document in it", f)
		}
	}
	return out, nil
}

// pointAt checks one document and rewrites what calls out of the API
// server to point at s.
func (s *HostServer) pointAt(doc map[string]any) (hostObject, error) {
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	kind, apiVersion := str(doc, "kind"), str(doc, "apiVersion")
	meta, _ := doc["metadata"].(map[string]any)
	o := hostObject{kind: kind, name: str(meta, "name"), doc: doc}
	switch kind + " " + apiVersion {
	case "ValidatingWebhookConfiguration admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration admissionregistration.k8s.io/v1":
	case "CustomResourceDefinition apiextensions.k8s.io/v1", "APIService apiregistration.k8s.io/v1":
	default:
		if kind == "" {
			kind = "no kind"
		}
		return o, fmt.Errorf("found %s (apiVersion %q): Install takes ValidatingWebhookConfiguration and MutatingWebhookConfiguration (admissionregistration.k8s.io/v1), CustomResourceDefinition (apiextensions.k8s.io/v1) and APIService (apiregistration.k8s.io/v1); apply other objects with Apply", kind, apiVersion)
	}
	if o.name == "" {
		return o, fmt.Errorf("%s without metadata.name", kind)
	}
	ca := base64.StdEncoding.EncodeToString(s.caPEM)
	switch kind {
	case "CustomResourceDefinition":
		d, err := crdOf(doc)
		if err != nil {
			return o, err
		}
		o.crd, o.resource = &d, "customresourcedefinitions.apiextensions.k8s.io"
		spec, _ := doc["spec"].(map[string]any)
		conv, _ := spec["conversion"].(map[string]any)
		if str(conv, "strategy") != "Webhook" {
			return o, nil
		}
		wh, _ := conv["webhook"].(map[string]any)
		if wh == nil {
			return o, fmt.Errorf("CRD %s: spec.conversion.strategy is Webhook but spec.conversion.webhook is missing: give it conversionReviewVersions", o.name)
		}
		cc, err := s.clientConfig(wh["clientConfig"], ca)
		if err != nil {
			return o, fmt.Errorf("CRD %s: %w", o.name, err)
		}
		wh["clientConfig"] = cc
		o.conversion = true
	case "APIService":
		o.resource = "apiservices.apiregistration.k8s.io"
		spec, _ := doc["spec"].(map[string]any)
		if spec == nil {
			return o, fmt.Errorf("APIService %s has no spec", o.name)
		}
		ns, name, port := s.Service()
		spec["service"] = map[string]any{"namespace": ns, "name": name, "port": port}
		spec["caBundle"] = ca
		delete(spec, "insecureSkipTLSVerify")
	default:
		o.resource = strings.ToLower(kind) + "s.admissionregistration.k8s.io"
		hooks, _ := doc["webhooks"].([]any)
		if len(hooks) == 0 {
			return o, fmt.Errorf("%s %s has no webhooks", kind, o.name)
		}
		for i, h := range hooks {
			hm, _ := h.(map[string]any)
			if hm == nil {
				return o, fmt.Errorf("%s %s: webhooks[%d] is not an object", kind, o.name, i)
			}
			cc, err := s.clientConfig(hm["clientConfig"], ca)
			if err != nil {
				return o, fmt.Errorf("%s %s: webhook %s: %w", kind, o.name, str(hm, "name"), err)
			}
			hm["clientConfig"] = cc
		}
		o.probe = probeToken()
		probe := map[string]any{
			"name":                    "probe.webhook.kindtest.io",
			"clientConfig":            map[string]any{"url": s.URL(s.probe + o.probe), "caBundle": ca},
			"rules":                   []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"configmaps"}, "scope": "Namespaced"}},
			"objectSelector":          map[string]any{"matchLabels": map[string]any{probeLabel: o.probe}},
			"sideEffects":             "None",
			"admissionReviewVersions": []any{"v1"},
			"failurePolicy":           "Fail",
			"timeoutSeconds":          5,
		}
		// First, so that a webhook of the user's that denies ConfigMaps
		// is not called before it (mutating webhooks run in order).
		doc["webhooks"] = append([]any{probe}, hooks...)
	}
	return o, nil
}

// clientConfig is a webhook clientConfig pointing at s: the path of the
// one given (its service's, or its url's) on URL, with the CA bundle.
func (s *HostServer) clientConfig(v any, ca string) (map[string]any, error) {
	path := "/"
	cc, _ := v.(map[string]any)
	if svc, ok := cc["service"].(map[string]any); ok {
		if p, _ := svc["path"].(string); p != "" {
			path = p
		}
	} else if raw, _ := cc["url"].(string); raw != "" {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("clientConfig.url %q: %w", raw, err)
		}
		if u.Path != "" {
			path = u.Path
		}
	}
	return map[string]any{"url": s.URL(path), "caBundle": ca}, nil
}

// probeToken is a fresh label value for one configuration's probe.
func probeToken() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
