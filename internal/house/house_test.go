// Package house_test checks the rules of the repository's layout that no
// compiler checks: each audience's API in one place, packages documented,
// functions of few parameters, files named after what they do.
package house_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the module's root directory.
const root = "../.."

// pkgDir is one directory of Go files of the module.
type pkgDir struct {
	dir   string // relative to the root, slash-separated
	name  string // the package's name ("main" for a program)
	files []*ast.File
	tests []*ast.File
	names []string // file names, tests included
	fset  *token.FileSet
}

// packages parses every package of the module (the benchmarks module and
// testdata left out).
func packages(t *testing.T) []*pkgDir {
	t.Helper()
	byDir := map[string]*pkgDir{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case name == "testdata", name == "benchmarks" && filepath.Dir(path) == root, strings.HasPrefix(name, "."), strings.HasPrefix(name, "_"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := byDir[rel]
		if p == nil {
			p = &pkgDir{dir: rel, fset: token.NewFileSet()}
			byDir[rel] = p
		}
		f, err := parser.ParseFile(p.fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		p.names = append(p.names, d.Name())
		if strings.HasSuffix(path, "_test.go") {
			p.tests = append(p.tests, f)
			return nil
		}
		p.files = append(p.files, f)
		p.name = f.Name.Name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*pkgDir
	for _, p := range byDir {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pkgDir) int { return strings.Compare(a.dir, b.dir) })
	if len(out) < 30 {
		t.Fatalf("found %d packages: not the module's", len(out))
	}
	return out
}

// TestPackagesDocumented: every package with code has a doc.go holding its
// package comment, and every public library package (not internal, not a
// program) has at least one Example.
func TestPackagesDocumented(t *testing.T) {
	for _, p := range packages(t) {
		if len(p.files) == 0 {
			continue // tests only
		}
		if !slices.Contains(p.names, "doc.go") {
			t.Errorf("%s: no doc.go", p.dir)
		}
		for _, f := range p.files {
			name := filepath.Base(p.fset.Position(f.Pos()).Filename)
			switch {
			case name == "doc.go" && f.Doc == nil:
				t.Errorf("%s/doc.go holds no package comment", p.dir)
			case name != "doc.go" && f.Doc != nil:
				t.Errorf("%s/%s holds a package comment: it belongs in doc.go", p.dir, name)
			}
		}
		if p.name == "main" || strings.Contains("/"+p.dir+"/", "/internal/") {
			continue
		}
		if !hasExample(p) {
			t.Errorf("%s: no Example function in its tests", p.dir)
		}
	}
}

func hasExample(p *pkgDir) bool {
	for _, f := range p.tests {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
				return true
			}
		}
	}
	return false
}

// maxParams is the most parameters a function of the library takes: past
// it, a struct says what the values are.
const maxParams = 6

// imposed are the functions whose signature another package dictates.
var imposed = map[string]bool{
	"grpcrl/client.go: grpc.UnaryClientInterceptor": true,
}

// TestFewParameters: no function or method of the module's code (tests
// aside) takes more than six parameters, but those whose signature
// another package imposes.
func TestFewParameters(t *testing.T) {
	for _, p := range packages(t) {
		for _, f := range p.files {
			file := p.dir + "/" + filepath.Base(p.fset.Position(f.Pos()).Filename)
			ast.Inspect(f, func(n ast.Node) bool {
				var (
					ft   *ast.FuncType
					name string
				)
				switch x := n.(type) {
				case *ast.FuncDecl:
					ft, name = x.Type, x.Name.Name
				case *ast.FuncLit:
					ft, name = x.Type, "a function literal"
				default:
					return true
				}
				if n := params(ft); n > maxParams && !imposed[file+": "+returnedAs(f, ft)] {
					t.Errorf("%s: %s (line %d) takes %d parameters, want at most %d (a struct instead)", file, name, p.fset.Position(ft.Pos()).Line, n, maxParams)
				}
				return true
			})
		}
	}
}

func params(ft *ast.FuncType) int {
	n := 0
	for _, field := range ft.Params.List {
		n += max(len(field.Names), 1)
	}
	return n
}

// returnedAs names the result type of the function declaration that holds
// the literal ft, when it is a type of another package
// (grpc.UnaryClientInterceptor); "" otherwise.
func returnedAs(f *ast.File, ft *ast.FuncType) string {
	name := ""
	ast.Inspect(f, func(n ast.Node) bool {
		fd, ok := n.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
			return true
		}
		if fd.Pos() > ft.Pos() || fd.End() < ft.End() {
			return true
		}
		if sel, ok := fd.Type.Results.List[0].Type.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok {
				name = x.Name + "." + sel.Sel.Name
			}
		}
		return false
	})
	return name
}

// TestFilesNamedForBehaviour: no file is named after how it came to be
// (the reading or the ticket that found what it checks).
func TestFilesNamedForBehaviour(t *testing.T) {
	bad := regexp.MustCompile(`(?i)(^|_)((review|attack|session)(\d+[a-z]?)?|issue\d+)(_|\.)`)
	for _, p := range packages(t) {
		for _, name := range p.names {
			if bad.MatchString(name) {
				t.Errorf("%s/%s: name the file after the behaviour it holds", p.dir, name)
			}
		}
	}
}

// TestCoreIsTheApplicationsAPI: package core, the application's manual,
// exports at most 70 top-level names and no alias: store implementers and
// adapter authors have packages of their own.
func TestCoreIsTheApplicationsAPI(t *testing.T) {
	var core *pkgDir
	for _, p := range packages(t) {
		if p.dir == "core" {
			core = p
		}
	}
	if core == nil {
		t.Fatal("no package core")
	}
	var names []string
	for _, f := range core.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Assign.IsValid() {
							t.Errorf("core: type %s is an alias: name the type where it is defined", s.Name.Name)
						}
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if len(names) > 70 {
		slices.Sort(names)
		t.Errorf("core exports %d top-level names, want at most 70: %s", len(names), strings.Join(names, " "))
	}
	if len(names) < 30 {
		t.Errorf("core exports %d names: the parse missed its files", len(names))
	}
	if _, err := os.Stat(filepath.Join(root, "core", "store")); err != nil {
		t.Errorf("no core/store: the store contract has no package of its own")
	}
}

// processWords finds, in a comment, what speaks of how the software was
// built rather than of what it does: the tickets and the readings it came
// from, the targets it had to meet, the machine it was built on.
var processWords = regexp.MustCompile(`(?i:\bissues? #?\d+|\bthe issue\b|\bissue's\b|\bnot met\b|\bthis machine\b|\breview(?:er|ed|s)?\b|\b(?:this|previous|next|last) session\b|\bbars?\b)|\bDESIGN\b`)

// TestCommentsSpeakOfTheSoftware: package docs and comments, tests' among
// them, say what the code does, never how the project came to write it.
func TestCommentsSpeakOfTheSoftware(t *testing.T) {
	for _, p := range packages(t) {
		for _, f := range append(append([]*ast.File(nil), p.files...), p.tests...) {
			name := p.dir + "/" + filepath.Base(p.fset.Position(f.Pos()).Filename)
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					if m := processWords.FindString(c.Text); m != "" {
						t.Errorf("%s:%d: %q: say what the code does", name, p.fset.Position(c.Pos()).Line, m)
					}
				}
			}
		}
	}
}
