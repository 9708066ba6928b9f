package kindtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/poll"
)

// crdTimeout bounds InstallCRDs' wait for the CRDs to be served, when
// ctx has no earlier deadline.
const crdTimeout = 2 * time.Minute

// crd is what InstallCRDs needs of a CustomResourceDefinition: where it
// came from, its name, and the group, plural and served versions that
// discovery must list.
type crd struct {
	file     string
	name     string
	group    string
	plural   string
	versions []string
	doc      map[string]any
}

// InstallCRDs installs the CustomResourceDefinitions in paths (files, or
// directories whose .yaml, .yml and .json files are read in name order;
// YAML or JSON, several documents a file) with a server-side apply, and
// returns once every one is Established and API discovery lists its
// resource in each served version, so that a custom resource can be
// created at once. Every document must be an apiextensions.k8s.io/v1
// CustomResourceDefinition: anything else is refused, naming the file and
// the kind, before anything is applied. A CRD that is not served within
// ctx (or 2 minutes) is named with its conditions.
func (c *Cluster) InstallCRDs(ctx context.Context, paths ...string) error {
	crds, err := readCRDs(paths)
	if err != nil {
		return fmt.Errorf("kindtest: cluster %s: install CRDs: %w", c.name, err)
	}
	if err := c.usable("install CRDs"); err != nil {
		return fmt.Errorf("kindtest: %w", err)
	}
	if err := c.installCRDs(ctx, crds); err != nil {
		return fmt.Errorf("kindtest: cluster %s: install CRDs: %w", c.name, err)
	}
	return nil
}

func (c *Cluster) installCRDs(ctx context.Context, crds []crd) error {
	var manifests bytes.Buffer
	for _, d := range crds {
		b, err := json.Marshal(d.doc)
		if err != nil {
			return fmt.Errorf("%s: CRD %s: %w", d.file, d.name, err)
		}
		manifests.Write(b)
		manifests.WriteByte('\n')
	}
	if _, err := c.KubectlInput(ctx, &manifests, "apply", "--server-side", "--force-conflicts", "--field-manager=kindtest", "-f", "-"); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, crdTimeout)
		defer cancel()
	}
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	for _, d := range crds {
		if err := waitCRDServed(ctx, api, d); err != nil {
			return err
		}
	}
	return nil
}

// waitCRDServed waits until CRD d is Established and discovery lists its
// resource in every served version.
func waitCRDServed(ctx context.Context, api *apiClient, d crd) error {
	if conds, err := waitCondition(ctx, api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+d.name, "Established"); err != nil {
		return fmt.Errorf("%s: CRD %s not Established (%v); conditions: %s", d.file, d.name, err, conds)
	}
	var last error
	for _, v := range d.versions {
		var list struct {
			Resources []struct {
				Name string `json:"name"`
			} `json:"resources"`
		}
		path := "/apis/" + d.group + "/" + v
		err := poll.Until(ctx, 20*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
			list.Resources = nil
			last = api.get(ctx, path, &list)
			return last == nil && slices.ContainsFunc(list.Resources, func(r struct {
				Name string `json:"name"`
			}) bool {
				return r.Name == d.plural
			}), nil
		})
		if err != nil {
			return fmt.Errorf("%s: CRD %s is Established, but discovery (%s) does not list %s (%v; last answer: %v)", d.file, d.name, path, d.plural, err, last)
		}
	}
	return nil
}

// readCRDs reads and checks the CRDs in paths: files, or directories
// whose manifest files are read in name order.
func readCRDs(paths []string) ([]crd, error) {
	files, err := manifestFiles(paths, "CRD")
	if err != nil {
		return nil, err
	}
	var out []crd
	seen := map[string]string{}
	for _, f := range files {
		crds, err := readCRDFile(f)
		if err != nil {
			return nil, err
		}
		for _, d := range crds {
			if prev, ok := seen[d.name]; ok {
				return nil, fmt.Errorf("%s: CRD %s is also in %s: give each CRD once", f, d.name, prev)
			}
			seen[d.name] = f
		}
		out = append(out, crds...)
	}
	return out, nil
}

// manifestFiles lists the files of paths: files, or directories whose
// .yaml, .yml and .json files are taken in name order. what names the
// manifests for errors.
func manifestFiles(paths []string, what string) ([]string, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("no path given: pass the %s files or directories", what)
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		n := len(files)
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
		if len(files) == n {
			return nil, fmt.Errorf("directory %s holds no .yaml, .yml or .json file", p)
		}
	}
	return files, nil
}

// readCRDFile reads the CRDs of one file, every document of which must be
// one.
func readCRDFile(file string) ([]crd, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []crd
	err = bootstrap.EachDocument(string(b), func(doc map[string]any) error {
		d, err := crdOf(doc)
		if err != nil {
			return err
		}
		d.file = file
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no document in it", file)
	}
	return out, nil
}

// crdOf checks that doc is an apiextensions.k8s.io/v1
// CustomResourceDefinition and reads what the wait needs.
func crdOf(doc map[string]any) (crd, error) {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	kind, apiVersion := str(doc, "kind"), str(doc, "apiVersion")
	if kind != "CustomResourceDefinition" || apiVersion != "apiextensions.k8s.io/v1" {
		if kind == "" {
			kind = "no kind"
		}
		return crd{}, fmt.Errorf("found %s (apiVersion %q), not a CustomResourceDefinition of apiextensions.k8s.io/v1: InstallCRDs installs CRDs only; apply other objects with Apply", kind, apiVersion)
	}
	meta, _ := doc["metadata"].(map[string]any)
	spec, _ := doc["spec"].(map[string]any)
	names, _ := spec["names"].(map[string]any)
	d := crd{name: str(meta, "name"), group: str(spec, "group"), plural: str(names, "plural"), doc: doc}
	if d.name == "" || d.group == "" || d.plural == "" {
		return crd{}, fmt.Errorf("CRD %q lacks metadata.name, spec.group or spec.names.plural", d.name)
	}
	if want := d.plural + "." + d.group; d.name != want {
		return crd{}, fmt.Errorf("CRD %s: its name must be %s (spec.names.plural.spec.group)", d.name, want)
	}
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if served, _ := vm["served"].(bool); served && str(vm, "name") != "" {
			d.versions = append(d.versions, str(vm, "name"))
		}
	}
	if len(d.versions) == 0 {
		return crd{}, fmt.Errorf("CRD %s serves no version: set served: true on one of spec.versions", d.name)
	}
	return d, nil
}
