package kindtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kindtest/kindtest/internal/fixture"
)

func TestReadCRDsFixtures(t *testing.T) {
	dir := filepath.Join(fixture.Dir(), "crds")
	crds, err := readCRDs([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range crds {
		got = append(got, d.name+" "+d.group+" "+d.plural+" "+strings.Join(d.versions, ","))
	}
	// A directory's files in name order: gadgets.json, then widgets.yaml.
	want := []string{
		"gadgets.example.kindtest.dev example.kindtest.dev gadgets v1",
		"widgets.example.kindtest.dev example.kindtest.dev widgets v1,v1alpha1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("readCRDs(%s) = %q, want %q", dir, got, want)
	}
}

func TestReadCRDsMultiDocument(t *testing.T) {
	dir := t.TempDir()
	one, err := os.ReadFile(filepath.Join(fixture.Dir(), "crds", "widgets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	two := strings.NewReplacer("widgets", "doohickeys", "widget", "doohickey", "Widget", "Doohickey").Replace(string(one))
	f := filepath.Join(dir, "both.yml")
	if err := os.WriteFile(f, []byte(string(one)+"\n---\n"+two+"\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crds, err := readCRDs([]string{f})
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 || crds[0].name != "widgets.example.kindtest.dev" || crds[1].name != "doohickeys.example.kindtest.dev" {
		t.Errorf("readCRDs(%s): %d CRDs %+v, want widgets then doohickeys", f, len(crds), crds)
	}
}

func TestReadCRDsRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crd := func(name, group, plural, served string) string {
		return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: " + name + "}\n" +
			"spec:\n  group: " + group + "\n  scope: Namespaced\n  names: {plural: " + plural + ", kind: X}\n" +
			"  versions: [{name: v1, served: " + served + ", storage: true, schema: {openAPIV3Schema: {type: object}}}]\n"
	}
	configMap := write("cm.yaml", crd("as.example.com", "example.com", "as", "true")+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	write("empty/notes.txt", "not a manifest")
	for _, tc := range []struct {
		name  string
		paths []string
		want  []string
	}{
		{"no path", nil, []string{"no path given"}},
		{"missing", []string{filepath.Join(dir, "nope.yaml")}, []string{"nope.yaml", "no such file"}},
		{"not a CRD", []string{configMap}, []string{"cm.yaml", "document 2", "found ConfigMap", "Apply"}},
		{"v1beta1", []string{write("beta.yaml", strings.Replace(crd("bs.example.com", "example.com", "bs", "true"), "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1))}, []string{"beta.yaml", "apiextensions.k8s.io/v1beta1"}},
		{"no kind", []string{write("nokind.json", `{"metadata": {"name": "x"}}`)}, []string{"nokind.json", "found no kind"}},
		{"not YAML", []string{write("bad.yaml", "kind: [unclosed\n")}, []string{"bad.yaml", "document 1"}},
		{"empty file", []string{write("blank.yaml", "---\n")}, []string{"blank.yaml", "no document"}},
		{"empty directory", []string{empty}, []string{"empty", "no .yaml, .yml or .json file"}},
		{"wrong name", []string{write("name.yaml", crd("cs.example.com", "example.org", "cs", "true"))}, []string{"cs.example.com", "must be cs.example.org"}},
		{"nothing served", []string{write("served.yaml", crd("ds.example.com", "example.com", "ds", "false"))}, []string{"ds.example.com", "serves no version"}},
		{"twice", []string{write("e1.yaml", crd("es.example.com", "example.com", "es", "true")), write("e2.yaml", crd("es.example.com", "example.com", "es", "true"))}, []string{"e2.yaml", "es.example.com", "also in", "e1.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readCRDs(tc.paths)
			if err == nil {
				t.Fatalf("readCRDs(%q) = nil error, want one saying %q", tc.paths, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("readCRDs(%q) = %q, want it to say %q", tc.paths, err, w)
				}
			}
		})
	}
}
