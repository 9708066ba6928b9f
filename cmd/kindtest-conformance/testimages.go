package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// imageConfig is one image of the e2e framework's list
// (test/utils/image/manifest.go): `configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}`.
type imageConfig struct {
	// ID is the framework's name for it: "Agnhost".
	ID string
	// Name and Version are the repository under the registry, and the tag.
	Name, Version string
	// Ref is the full reference the specs use, from e2e.test --list-images.
	Ref string
}

var configLine = regexp.MustCompile(`configs\[(\w+)\]\s*=\s*Config\{list\.\w+,\s*"([^"]+)",\s*"([^"]+)"\}`)

// parseManifest reads the image IDs, names and versions of manifest.go.
func parseManifest(src []byte) []imageConfig {
	var out []imageConfig
	for _, m := range configLine.FindAllSubmatch(src, -1) {
		out = append(out, imageConfig{ID: string(m[1]), Name: string(m[2]), Version: string(m[3])})
	}
	return out
}

// matchRefs gives each config its reference from the list e2e.test
// --list-images prints (one reference a line; the registry comes from
// there, so KUBE_TEST_REPO_LIST is honoured). A config with no reference
// in the list keeps Ref empty.
func matchRefs(configs []imageConfig, listed string) []imageConfig {
	var refs []string
	for _, l := range strings.Split(listed, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			refs = append(refs, l)
		}
	}
	out := slices.Clone(configs)
	for i, c := range out {
		suffix := "/" + c.Name + ":" + c.Version
		for _, r := range refs {
			if strings.HasSuffix(r, suffix) {
				out[i].Ref = r
				break
			}
		}
	}
	return out
}

// conformanceSpec is one entry of test/conformance/testdata/conformance.yaml.
type conformanceSpec struct {
	Codename, File string
}

// parseConformanceList reads the codename and file of every conformance
// spec from conformance.yaml, whose entries are
//
//   - testname: ...
//     codename: '[sig-x] ... [Conformance]'  (folded over lines when long)
//     ...
//     file: test/e2e/...
func parseConformanceList(data []byte) []conformanceSpec {
	var specs []conformanceSpec
	var cur *conformanceSpec
	inCodename := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "- testname:"):
			specs = append(specs, conformanceSpec{})
			cur = &specs[len(specs)-1]
			inCodename = false
		case cur == nil:
		case strings.HasPrefix(line, "  codename:"):
			cur.Codename = strings.TrimSpace(strings.TrimPrefix(line, "  codename:"))
			inCodename = true
		case inCodename && strings.HasPrefix(line, "    "):
			cur.Codename += " " + strings.TrimSpace(line)
		case strings.HasPrefix(line, "  file:"):
			cur.File = strings.TrimSpace(strings.TrimPrefix(line, "  file:"))
			inCodename = false
		default:
			inCodename = false
		}
	}
	for i := range specs {
		specs[i].Codename = strings.ReplaceAll(strings.Trim(specs[i].Codename, `'"`), "''", "'")
	}
	return specs
}

// selectSpecs keeps the specs whose name matches focus and not skip, as
// ginkgo's --focus and --skip select them ("" matches every name, and
// no name, for focus and skip): only their images are built and loaded.
func selectSpecs(specs []conformanceSpec, focus, skip string) ([]conformanceSpec, error) {
	match := func(flag, expr string) (*regexp.Regexp, error) {
		if expr == "" {
			return nil, nil
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("-%s %q: %w", flag, expr, err)
		}
		return re, nil
	}
	f, err := match("focus", focus)
	if err != nil {
		return nil, err
	}
	sk, err := match("skip", skip)
	if err != nil {
		return nil, err
	}
	var out []conformanceSpec
	for _, s := range specs {
		if (f == nil || f.MatchString(s.Codename)) && (sk == nil || !sk.MatchString(s.Codename)) {
			out = append(out, s)
		}
	}
	return out, nil
}

// imageUsers maps each image ID to the conformance spec files that name
// it (imageutils.ID, image.ID or e2eimage.ID), with how many conformance
// specs each file holds. Found in the source, so per file, not per spec:
// a file's specs that do not use the image are counted too.
func imageUsers(kubernetesDir string, specs []conformanceSpec, ids []string) (map[string][]fileUse, error) {
	perFile := map[string]int{}
	for _, s := range specs {
		perFile[s.File]++
	}
	files := make([]string, 0, len(perFile))
	for f := range perFile {
		files = append(files, f)
	}
	sort.Strings(files)
	users := map[string][]fileUse{}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(kubernetesDir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		for _, id := range namedImages(src, ids) {
			users[id] = append(users[id], fileUse{File: f, Specs: perFile[f]})
		}
	}
	return users, nil
}

// fileUse is a conformance spec file that names an image.
type fileUse struct {
	File  string
	Specs int
}

// namedImages returns those of ids that src names as imageutils.ID,
// image.ID or e2eimage.ID, and BusyBox (when among ids) if src calls one
// of the framework's helpers that run it.
func namedImages(src []byte, ids []string) []string {
	var out []string
	for _, id := range ids {
		re := regexp.MustCompile(`\b(imageutils|image|e2eimage)\.` + regexp.QuoteMeta(id) + `\b`)
		if re.Match(src) || (id == "BusyBox" && busyboxHelpers.Match(src)) {
			out = append(out, id)
		}
	}
	return out
}

// busyboxHelpers are the calls of the e2e framework's helpers (v1.37.2)
// whose pods run BusyBox unless told otherwise, named in no spec's own
// image list: e2epod's default test image and the pods it makes
// (MakePod, MakeSecPod, CreatePod and their kin), e2edeployment's
// CreateDeployment, e2ejob's test jobs, e2evolume's tester pods, the
// RuntimeClass and AppArmor test pods, under the names every spec file
// imports them as. The files of most conformance
// specs name BusyBox themselves; those of the Services, DNS and
// pod-networking specs do neither, so a slice of them needs no BusyBox.
var busyboxHelpers = regexp.MustCompile(`\b(e2epod|e2edeployment|e2ejob|e2evolume|e2eruntimeclass|e2esecurity)\.(GetDefaultTestImage|GetDefaultTestImageID|MakePod|MakePodSpec|MakeSecPod|CreatePod|CreateSecPod|CreateSecPodWithNodeSelection|CreateUnschedulablePod|CreateDeployment|NewTestJob|NewTestJobOnNode|TestVolumeClient|TestVolumeClientSlow|InjectContent|NewRuntimeClassPod|AppArmorTestPod)\(`)

// manifestTemplateImages are the images that the e2e testing manifests'
// templates name ({{.AgnhostImage}} and the like), which the kubectl specs
// apply: found by reading the templates under test/e2e/testing-manifests.
func manifestTemplateImages(kubernetesDir string, ids []string) ([]string, error) {
	var found []string
	root := filepath.Join(kubernetesDir, "test", "e2e", "testing-manifests")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".in") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if bytes.Contains(data, []byte("{{."+id+"Image}}")) && !slices.Contains(found, id) {
				found = append(found, id)
			}
		}
		return nil
	})
	return found, err
}

// imagePlan is what the tool does about one image the conformance specs
// use.
type imagePlan struct {
	imageConfig
	// How says how it is made, or why it is not.
	How string
	// Built is set for an image this tool builds; InNode for one the node
	// image holds already (kubeadm's pause and etcd).
	Built, InNode bool
	// Faithful is false for a substitute: built, but not as upstream
	// builds it (another version of the software); How says what differs.
	Faithful bool
	// StandInFor, on a stand-in that is another built image under this
	// reference, names that image ("agnhost:2.66.1").
	StandInFor string
	// Mirror is set on a built image that the cluster's registry serves
	// too, as a mirror of the image's registry, for the specs that pull it
	// with Always (markMirrored).
	Mirror bool
	// Users are the conformance spec files that name it.
	Users []fileUse
}

// unmet reports whether the image is missing or a substitute.
func (p imagePlan) unmet() bool { return !(p.Built || p.InNode) || !p.Faithful }

// describe is one line for the list of images that were not built
// faithfully, with the spec files that need them.
func (p imagePlan) describe() string {
	var b strings.Builder
	state := "NOT BUILT"
	if p.Built || p.InNode {
		state = "SUBSTITUTE"
	}
	fmt.Fprintf(&b, "%s %s (%s): %s", state, p.Ref, p.ID, p.How)
	if len(p.Users) > 0 {
		var files []string
		n := 0
		for _, u := range p.Users {
			files = append(files, fmt.Sprintf("%s (%d)", strings.TrimPrefix(u.File, "test/e2e/"), u.Specs))
			n += u.Specs
		}
		fmt.Fprintf(&b, "; named in %d conformance spec files holding %d specs: %s", len(p.Users), n, strings.Join(files, ", "))
	}
	return b.String()
}
