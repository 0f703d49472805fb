package archcheck

import (
	"go/ast"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// decls is what one package declares: its top-level names, and each type's methods and
// fields (open: a type that embeds another, whose promoted names are not followed).
type decls struct {
	names   map[string]bool
	members map[string]map[string]bool
	open    map[string]bool
}

// declsOf collects p's declarations.
func declsOf(p *pkg) *decls {
	d := &decls{names: map[string]bool{}, members: map[string]map[string]bool{}, open: map[string]bool{}}
	member := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
	}
	for _, f := range p.files {
		for _, decl := range f.Decls {
			switch x := decl.(type) {
			case *ast.FuncDecl:
				if x.Recv == nil {
					d.names[x.Name.Name] = true
					continue
				}
				member(recvType(x.Recv.List[0].Type), x.Name.Name)
			case *ast.GenDecl:
				for _, spec := range x.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						d.names[s.Name.Name] = true
						d.typeMembers(s, member)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							d.names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return d
}

// typeMembers records the fields and interface methods of the type s declares.
func (d *decls) typeMembers(s *ast.TypeSpec, member func(typ, name string)) {
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		d.open[s.Name.Name] = true // an alias or a named basic type: its members are elsewhere
		return
	}
	for _, fl := range fields.List {
		if len(fl.Names) == 0 {
			d.open[s.Name.Name] = true
		}
		for _, n := range fl.Names {
			member(s.Name.Name, n.Name)
		}
	}
}

// recvType returns the name of a method's receiver type.
func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// has reports whether d declares name, or member of type name.
func (d *decls) has(name, member string) bool {
	if !d.names[name] {
		return false
	}
	return member == "" || d.open[name] || d.members[name][member]
}

// qualified matches a name a comment gives with its package or type: pkg.Name, pkg.Type.Member,
// Type.Member.
var qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*|[A-Z]\w*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)

// TestDocNames checks that the identifiers doc comments name exist: a blockfs package's
// exported name (layout.Dataset, stack.Build, view.Set.Kinds) and a type's method or field
// named from its own package (Dataset.Stored). A comment that names a type that moved, or a
// method that is gone, misleads its reader.
func TestDocNames(t *testing.T) {
	pkgs, fset := load(t)
	all := map[string]*decls{}    // by package directory
	byName := map[string]string{} // a package's name -> its directory, where only one has it
	seen := map[string]int{}
	for dir, p := range pkgs {
		all[dir] = declsOf(p)
		for _, f := range p.files {
			seen[f.Name.Name]++ // cmd/blockfs is main: "blockfs.Mount" is the Python package's
			byName[f.Name.Name] = dir
			break
		}
	}
	for dir, p := range pkgs {
		if strings.HasPrefix(dir, "bench/") || strings.HasPrefix(dir, "scripts/") {
			continue
		}
		for name, f := range p.files {
			imports := fileImports(f)
			for _, cg := range f.Comments {
				for _, m := range qualified.FindAllStringSubmatchIndex(cg.Text(), -1) {
					text := cg.Text()
					q, n, mem := text[m[2]:m[3]], text[m[4]:m[5]], ""
					if m[6] >= 0 {
						mem = text[m[6]:m[7]]
					}
					if why := checkName(q, n, mem, dir, imports, all, byName, seen); why != "" {
						t.Errorf("%s:%d: a comment names %s", name, fset.Position(cg.Pos()).Line, why)
					}
				}
			}
		}
	}
}

// checkName returns what is missing of q.n (q.n.mem) named in a comment of package dir, or "".
func checkName(q, n, mem, dir string, imports map[string]string, all map[string]*decls, byName map[string]string, seen map[string]int) string {
	if q[0] >= 'A' && q[0] <= 'Z' { // Type.Member, of the comment's own package
		own := all[dir]
		if own.names[q] && !own.has(q, n) {
			return q + "." + n + ", which " + dir + " does not declare"
		}
		return ""
	}
	target, imported := imports[q]
	switch {
	case imported && !strings.HasPrefix(target, module):
		return "" // another module's package (io/fs, go-fuse's fs)
	case imported:
		target = strings.TrimPrefix(target, module)
	case seen[q] == 1:
		target = byName[q]
	default:
		return "" // not a blockfs package, or a name several share
	}
	d := all[target]
	if d == nil || target == dir {
		return ""
	}
	if !d.has(n, mem) {
		if mem != "" && d.names[n] {
			return q + "." + n + "." + mem + ", which " + target + " does not declare"
		}
		return q + "." + n + ", which " + target + " does not declare"
	}
	return ""
}

// majorVersion is a module path's major version element ("v2"), which is not a package name.
var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// fileImports returns a file's imports by the name it uses for each.
func fileImports(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := path.Base(p)
		if majorVersion.MatchString(name) { // a module root of a major version (.../y/v2): package y
			name = path.Base(path.Dir(p))
		}
		if im.Name != nil {
			name = im.Name.Name
		}
		out[name] = p
	}
	return out
}

// TestDocNamesCatches: the check finds a name that is gone, a method that is gone and a type's
// member named from its own package, and passes what exists or is not blockfs's.
func TestDocNamesCatches(t *testing.T) {
	layout := &decls{names: map[string]bool{"Dataset": true, "Open": true},
		members: map[string]map[string]bool{"Dataset": {"Stored": true}}, open: map[string]bool{}}
	all := map[string]*decls{"layout": layout, "view": {names: map[string]bool{}, members: map[string]map[string]bool{}, open: map[string]bool{}}}
	byName, seen := map[string]string{"layout": "layout", "view": "view"}, map[string]int{"layout": 1, "view": 1}
	none := map[string]string{}
	for _, c := range []struct {
		q, n, mem, dir string
		imports        map[string]string
		bad            bool
	}{
		{"layout", "Dataset", "", "view", none, false},
		{"layout", "Dataset", "Stored", "view", none, false},
		{"layout", "Gone", "", "view", none, true},
		{"layout", "Dataset", "Source", "view", none, true},
		{"Dataset", "Source", "", "layout", none, true},
		{"Dataset", "Stored", "", "layout", none, false},
		{"layout", "Gone", "", "view", map[string]string{"layout": "example.com/layout"}, false},
		{"os", "Gone", "", "view", none, false},
	} {
		why := checkName(c.q, c.n, c.mem, c.dir, c.imports, all, byName, seen)
		if (why != "") != c.bad {
			t.Errorf("%s.%s.%s in %s: %q", c.q, c.n, c.mem, c.dir, why)
		}
	}
}
