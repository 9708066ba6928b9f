package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// pullAlwaysSpecs returns those of specs that pull an image with the
// Always pull policy: a loaded image does not satisfy it, the kubelet has
// containerd ask the registry every time. Found in each spec file's source
// (pullAlways); in v1.37.2 they are the ImageVolume spec (kitten as an
// image volume) and the Projected PodCertificate mTLS spec (agnhost).
func pullAlwaysSpecs(kubernetesDir string, specs []conformanceSpec) ([]conformanceSpec, error) {
	found := map[string]alwaysPulls{}
	var out []conformanceSpec
	for _, s := range specs {
		a, ok := found[s.File]
		if !ok {
			src, err := os.ReadFile(filepath.Join(kubernetesDir, filepath.FromSlash(s.File)))
			if err != nil {
				return nil, err
			}
			if a, err = pullAlways(src); err != nil {
				return nil, fmt.Errorf("%s: %w", s.File, err)
			}
			found[s.File] = a
		}
		if a.covers(s.Codename) {
			out = append(out, s)
		}
	}
	return out, nil
}

// alwaysPulls is what pullAlways found in a spec file.
type alwaysPulls struct {
	// texts are the texts of the conformance specs that pull with Always,
	// as their It or ConformanceIt call gives them.
	texts []string
	// file is set when the file pulls with Always where no one
	// conformance spec can be told (in a Describe's own body, or in a spec
	// whose text is not a literal): every spec of the file counts.
	file bool
}

// covers reports whether the conformance spec of that name (conformance.yaml's
// codename, ginkgo's full text) pulls with Always.
func (a alwaysPulls) covers(codename string) bool {
	if a.file {
		return true
	}
	for _, t := range a.texts {
		if strings.Contains(codename, t) {
			return true
		}
	}
	return false
}

// pullAlways finds the conformance specs of a spec file's source that
// pull with Always: whose body names v1.PullAlways (a container's
// imagePullPolicy, an image volume's pullPolicy), or calls a function of
// the same file that does, directly or through others of the file. A
// conformance spec is a framework.ConformanceIt call or an It given
// framework.WithConformance(). Other specs' pulls do not count: the tool
// runs conformance specs only. A function of another file is not followed;
// in v1.37.2 no conformance spec pulls with Always through one (test/e2e
// names PullAlways in six files: the two specs' own, runtime.go's
// non-conformance image pull specs, localhost_nodeports.go, which holds no
// conformance spec, and the framework's pod client, which only reads it).
func pullAlways(src []byte) (alwaysPulls, error) {
	if !bytes.Contains(src, []byte("PullAlways")) {
		return alwaysPulls{}, nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return alwaysPulls{}, err
	}

	// The file's functions and methods by name (a name may be both).
	funcs := map[string][]*ast.FuncDecl{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
			funcs[fd.Name.Name] = append(funcs[fd.Name.Name], fd)
		}
	}
	// Every spec: an It-like call with a function literal for its body.
	type spec struct {
		text        string // "" when not a string literal
		conformance bool
		body        *ast.FuncLit
	}
	var specs []spec
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		name := calledName(call)
		if name != "It" && name != "ConformanceIt" {
			return true
		}
		s := spec{conformance: name == "ConformanceIt"}
		for i, arg := range call.Args {
			switch a := arg.(type) {
			case *ast.BasicLit:
				if i == 0 && a.Kind == token.STRING {
					s.text, _ = strconv.Unquote(a.Value)
				}
			case *ast.CallExpr:
				if calledName(a) == "WithConformance" {
					s.conformance = true
				}
			case *ast.FuncLit:
				s.body = a
			}
		}
		if s.body != nil {
			specs = append(specs, s)
		}
		return true
	})
	within := func(n ast.Node, pos token.Pos) bool { return n.Pos() <= pos && pos < n.End() }

	var out alwaysPulls
	// Functions that pull with Always themselves; specs then add theirs.
	pulling := map[string]bool{}
	conformanceTexts := map[string]bool{}
	mark := func(s spec) {
		switch {
		case !s.conformance:
		case s.text == "":
			out.file = true
		case !conformanceTexts[s.text]:
			conformanceTexts[s.text] = true
			out.texts = append(out.texts, s.text)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "PullAlways" {
			return true
		}
		pos := sel.Pos()
		// Ginkgo specs do not nest: one spec at most holds it.
		if i := slices.IndexFunc(specs, func(s spec) bool { return within(s.body, pos) }); i >= 0 {
			mark(specs[i])
			return true
		}
		for name, decls := range funcs {
			for _, fd := range decls {
				if within(fd, pos) {
					if slices.ContainsFunc(specs, func(s spec) bool { return within(fd, s.body.Pos()) }) {
						// Set-up code around specs: which of them it
						// serves is not told.
						out.file = true
					} else {
						pulling[name] = true
					}
					return true
				}
			}
		}
		out.file = true // a package-level variable
		return true
	})
	// The functions that call a pulling function pull too.
	for changed := true; changed; {
		changed = false
		for name, decls := range funcs {
			if pulling[name] {
				continue
			}
			for _, fd := range decls {
				if calls(fd.Body, pulling) {
					pulling[name], changed = true, true
					break
				}
			}
		}
	}
	for _, s := range specs {
		if calls(s.body.Body, pulling) {
			mark(s)
		}
	}
	return out, nil
}

// calledName is the name a call calls: f for f(...), x.f(...) and
// x.y.f(...); "" for anything else.
func calledName(call *ast.CallExpr) string {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return fun.Name
	case *ast.SelectorExpr:
		return fun.Sel.Name
	}
	return ""
}

// calls reports whether n calls a function of one of the names.
func calls(n ast.Node, names map[string]bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && names[calledName(call)] {
			found = true
		}
		return !found
	})
	return found
}
