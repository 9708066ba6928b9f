// Command housemetrics measures the shape of the kindtest package, the
// figures issue #22 judges the package's layout by: the fields and methods
// of *Cluster, the pairs of files that refer to each other both ways, the
// files that hold With* options, and whether a test binary that imports
// kindtest links the node-image builder (package images).
//
// Run it from the tools module with the repository root as argument (-v
// also lists the names behind each two-way pair):
//
//	cd tools && go run ./housemetrics ..
//
// It reads the source with go/parser and resolves names with go/types
// (imports from their export data, through `go list`), so it needs no
// engine and changes nothing.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// verbose (-v) lists, for each two-way pair, the names each file uses
// of the other.
var verbose bool

func main() {
	root := "."
	for _, a := range os.Args[1:] {
		if a == "-v" {
			verbose = true
		} else {
			root = a
		}
	}
	if err := run(root); err != nil {
		fmt.Fprintln(os.Stderr, "housemetrics:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "kindtest")
	fset := token.NewFileSet()
	// The package's own test files (package kindtest) are type-checked
	// too, for what they assign, but no figure counts them.
	pkgs, err := parser.ParseDir(fset, dir, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	pkg := pkgs["kindtest"]
	if pkg == nil {
		return fmt.Errorf("no package kindtest in %s", dir)
	}
	var files, all []*ast.File
	lines := 0
	for name, f := range pkg.Files {
		all = append(all, f)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		files = append(files, f)
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	sort.Slice(files, func(i, j int) bool { return fset.File(files[i].Pos()).Name() < fset.File(files[j].Pos()).Name() })

	// Imports are resolved from export data, which `go list -export`
	// builds, run in the repository's module.
	exports, err := exportData(root)
	if err != nil {
		return err
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp}
	tpkg, err := conf.Check("github.com/kindtest/kindtest/kindtest", fset, all, info)
	if err != nil {
		return err
	}

	// *Cluster: its fields and methods, and the files the methods are in.
	cluster := tpkg.Scope().Lookup("Cluster").Type().(*types.Named)
	st := cluster.Underlying().(*types.Struct)
	fields := st.NumFields()
	// flat counts, for a field of a struct type declared beside Cluster
	// (the handle's parts: identity, access, life), its fields instead.
	clusterFile := fset.Position(cluster.Obj().Pos()).Filename
	flat := 0
	var parts []string
	for i := range st.NumFields() {
		f := st.Field(i)
		if n, ok := f.Type().(*types.Named); ok && n.Obj().Pkg() == tpkg && fset.Position(n.Obj().Pos()).Filename == clusterFile {
			if sub, ok := n.Underlying().(*types.Struct); ok {
				flat += sub.NumFields()
				parts = append(parts, fmt.Sprintf("%s %d", n.Obj().Name(), sub.NumFields()))
				continue
			}
		}
		flat++
	}
	methodFiles := map[string]bool{}
	for i := range cluster.NumMethods() {
		methodFiles[filepath.Base(fset.Position(cluster.Method(i).Pos()).Filename)] = true
	}

	// Which file refers to which: a use of a package-level object, a
	// field or a method declared in another file of the package.
	refs := map[[2]string]bool{}
	why := map[[2]string]map[string]bool{}
	note := func(from token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != tpkg || !obj.Pos().IsValid() {
			return
		}
		pkgLevel := obj.Parent() == tpkg.Scope()
		_, method := obj.(*types.Func)
		v, isVar := obj.(*types.Var)
		if !pkgLevel && !method && !(isVar && v.IsField()) {
			return // a local name
		}
		a := filepath.Base(fset.Position(from).Filename)
		b := filepath.Base(fset.Position(obj.Pos()).Filename)
		if a != b && !strings.HasSuffix(a, "_test.go") && !strings.HasSuffix(b, "_test.go") {
			k := [2]string{a, b}
			refs[k] = true
			if why[k] == nil {
				why[k] = map[string]bool{}
			}
			why[k][obj.Name()] = true
		}
	}
	for id, obj := range info.Uses {
		note(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		note(sel.Sel.Pos(), s.Obj())
	}
	var pairs []string
	for r := range refs {
		if r[0] < r[1] && refs[[2]string{r[1], r[0]}] {
			p := r[0] + " <-> " + r[1]
			if verbose {
				p += fmt.Sprintf("\n      %s uses %s\n      %s uses %s", r[0], names(why[r]), r[1], names(why[[2]string{r[1], r[0]}]))
			}
			pairs = append(pairs, p)
		}
	}
	sort.Strings(pairs)

	// With* options: exported functions returning Option.
	optionFiles := map[string]int{}
	options := 0
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "With") || !fd.Name.IsExported() {
				continue
			}
			if strings.HasSuffix(fd.Name.Name, "ForTest") {
				continue
			}
			if r := fd.Type.Results; r != nil && len(r.List) == 1 {
				if id, ok := r.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
					options++
					optionFiles[filepath.Base(fset.Position(fd.Pos()).Filename)]++
				}
			}
		}
	}

	// Process-wide state: package-level variables that change after
	// initialisation (assigned, a field or element of them assigned,
	// deleted from, or of a sync or channel type); tables that are only
	// read are not counted.
	changed := map[types.Object]bool{}
	mark := func(e ast.Expr) {
		for {
			switch x := e.(type) {
			case *ast.IndexExpr:
				e = x.X
				continue
			case *ast.SelectorExpr:
				e = x.X // a field of it changes
				continue
			case *ast.Ident:
				if obj := info.Uses[x]; obj != nil {
					changed[obj] = true
				}
			}
			return
		}
	}
	for _, f := range all {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for _, l := range x.Lhs {
					mark(l)
				}
			case *ast.IncDecStmt:
				mark(x.X)
			case *ast.CallExpr:
				if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "delete" && len(x.Args) > 0 {
					mark(x.Args[0])
				}
			}
			return true
		})
	}
	var vars []string
	for _, name := range tpkg.Scope().Names() {
		v, ok := tpkg.Scope().Lookup(name).(*types.Var)
		if !ok || strings.HasSuffix(fset.Position(v.Pos()).Filename, "_test.go") {
			continue
		}
		t := v.Type().String()
		_, isChan := v.Type().Underlying().(*types.Chan)
		if changed[v] || isChan || strings.HasPrefix(t, "sync.") || strings.HasPrefix(t, "sync/atomic.") {
			vars = append(vars, name)
		}
	}

	imagesInLib, err := depends(root, "./kindtest", false)
	if err != nil {
		return err
	}
	imagesInTest, err := depends(root, "./examples/e2e", true)
	if err != nil {
		return err
	}

	fmt.Printf("kindtest/: %d files, %d lines (non-test)\n", len(files), lines)
	fmt.Printf("*Cluster fields: %d", fields)
	if len(parts) > 0 {
		fmt.Printf(" (%d counting the fields of its parts declared beside it: %s)", flat, strings.Join(parts, ", "))
	}
	fmt.Println()
	fmt.Printf("*Cluster methods: %d, in %d files\n", cluster.NumMethods(), len(methodFiles))
	fmt.Printf("file pairs referring to each other both ways: %d\n", len(pairs))
	for _, p := range pairs {
		fmt.Printf("  %s\n", p)
	}
	fmt.Printf("With* options: %d, in %d files:", options, len(optionFiles))
	for _, f := range sortedKeys(optionFiles) {
		fmt.Printf(" %s(%d)", f, optionFiles[f])
	}
	fmt.Println()
	fmt.Printf("process-wide state (package variables that change): %d: %s\n", len(vars), strings.Join(vars, " "))
	fmt.Printf("go list -deps ./kindtest contains images: %t\n", imagesInLib)
	fmt.Printf("go list -test -deps ./examples/e2e (a test binary importing kindtest) contains images: %t\n", imagesInTest)
	return nil
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// exportData builds the export data of the kindtest package's imports
// and returns the file of each, by import path.
func exportData(root string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", "-test", "./kindtest")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(l, "="); ok && file != "" {
			m[path] = file
		}
	}
	return m, nil
}

// depends says whether pkg (with its tests when test is set) depends on
// the images package.
func depends(root, pkg string, test bool) (bool, error) {
	args := []string{"list", "-deps"}
	if test {
		args = append(args, "-test")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if l == "github.com/kindtest/kindtest/images" {
			return true, nil
		}
	}
	return false, nil
}

func names(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
