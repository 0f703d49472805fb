package archcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/blockfs/blockfs/"

// pkg is one package directory of the module: its non-test files, parsed.
type pkg struct {
	dir     string // relative to the module root, slash-separated ("source/s3")
	files   map[string]*ast.File
	imports map[string]bool // the module's packages it imports, relative ("view")
}

// load parses every non-test Go file of the module (outside testdata and hidden dirs).
func load(t *testing.T) (map[string]*pkg, *token.FileSet) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "python" || name == "build" || name == "bin" || name == "shared") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := pkgs[rel]
		if p == nil {
			p = &pkg{dir: rel, files: map[string]*ast.File{}, imports: map[string]bool{}}
			pkgs[rel] = p
		}
		fileRel, _ := filepath.Rel(root, path)
		p.files[filepath.ToSlash(fileRel)] = f
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(ip, module) {
				p.imports[strings.TrimPrefix(ip, module)] = true
			} else if strings.HasPrefix(ip, "github.com/hanwen/go-fuse") {
				p.imports["go-fuse"] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs, fset
}

// allowed is the layering ARCHITECTURE.md draws, as an allow-list: each package of the module
// and the module's packages it may import ("go-fuse" for go-fuse's). A package not listed, or
// an import not allowed, fails TestImports: a new edge is a decision, made here, never a
// re-export to get round a deny-list.
var allowed = map[string][]string{
	// The bottom: the seam below the cache, the order, the formats.
	"source":  {},
	"shuffle": {"internal/lru", "internal/optname"},
	"layout": {"source", "internal/background", "internal/crc32c", "internal/fsync", "internal/optname",
		"internal/parallel", "internal/privdir", "internal/strictjson", "internal/userfile"},
	// The backends and the layers below the cache, stacked in one place (source/stack).
	// source/local still opens a dataset directory (its layout.Store: issue 54's store seam).
	"source/local": {"source", "layout", "internal/odirect", "internal/userfile"},
	// objstore is every store's requests, retries, checksums and uploads, written once; a
	// backend (s3) is a Client over one protocol; stores alone knows every backend.
	"source/objstore":  {"source", "internal/crc32c", "internal/flight", "internal/optname", "internal/parallel"},
	"source/s3":        {"source/objstore", "internal/optname"},
	"source/web":       {"source/objstore", "internal/optname"},
	"source/gcs":       {"source/objstore", "internal/optname"},
	"source/azure":     {"source/objstore", "internal/optname"},
	"source/stores":    {"source/objstore", "source/s3", "source/gcs", "source/azure", "source/web"},
	"source/diskcache": {"source", "internal/crc32c", "internal/flight", "internal/odirect", "internal/optname"},
	"source/stack": {"source", "layout", "source/local", "source/objstore", "source/diskcache",
		"internal/crc32c", "internal/lru", "internal/odirect", "internal/parallel"},
	// The page cache reads a source.Blocks and knows nothing of files; view arranges records
	// over it; fs serves a view and alone imports go-fuse (source for the errors it maps).
	"cache": {"source", "internal/flight"},
	"view":  {"source", "layout", "shuffle", "cache", "internal/lru"},
	"fs":    {"view", "source", "internal/optname", "internal/userfile", "go-fuse"},
	// The packer writes layout's formats, to local disk or an object store.
	"pack": {"source", "source/objstore", "source/stores", "layout", "shuffle", "internal/background", "internal/crc32c",
		"internal/fsync", "internal/infiles", "internal/near", "internal/odirect", "internal/optname", "internal/strictjson", "internal/userfile"},
	// A mount's life beside its data: the mount point, the registry of daemons and their
	// memory claims, the daemon's log, the users' lease.
	"mount/daemon": {"fs", "internal/fuseread", "internal/mountinfo", "internal/optname", "internal/privdir",
		"internal/sysmem", "internal/userfile"},
	// The memory plan, from the dataset and the memory the process really has.
	"mount/memory": {"layout", "cache", "source/stack", "internal/optname", "internal/sysmem"},
	// What a mount reports: stats.json's schema, composed of each layer's typed counters, and
	// the Prometheus endpoint.
	"mount/report": {"source", "source/objstore", "source/diskcache", "source/stack", "cache", "view", "fs",
		"internal/connlimit", "internal/fdlimit", "internal/optname"},
	// One mount, wired from every layer (shards are indexed through an Indexer the command
	// gives: no packer linked).
	"mount": {"mount/daemon", "mount/memory", "mount/report", "source", "source/local", "source/objstore", "source/stores", "source/diskcache",
		"source/stack", "layout", "shuffle", "cache", "view", "fs", "internal/infiles", "internal/near", "internal/odirect",
		"internal/optname", "internal/privdir", "internal/strictjson", "internal/sysmem", "internal/userfile"},
	// The command line is flags, printing and exit codes over mount and pack.
	"cmd/blockfs": {"mount", "mount/daemon", "mount/memory", "mount/report", "pack", "layout", "shuffle", "internal/fdlimit", "internal/fuseread", "internal/infiles",
		"internal/near", "internal/optname", "internal/userfile"},
	// Utilities import nothing of blockfs but one another.
	"internal/background": {}, "internal/connlimit": {}, "internal/corpus": {}, "internal/crc32c": {},
	"internal/fdlimit": {}, "internal/flight": {}, "internal/fsync": {}, "internal/infiles": {}, "internal/fuseread": {"internal/userfile"},
	"internal/lru": {}, "internal/mountinfo": {}, "internal/near": {}, "internal/odirect": {},
	"internal/optname": {}, "internal/parallel": {}, "internal/privdir": {}, "internal/strictjson": {},
	"internal/sysmem": {"internal/mountinfo"}, "internal/userfile": {}, "internal/archcheck": {},
	// Test helpers and the end-to-end tests.
	"internal/dstest": {"layout", "shuffle", "source/local"},
	"test":            {},
}

// TestImports checks every package's imports against allowed. The benchmarks' and scripts'
// own programs (bench/, scripts/) are tools, not layers, and are left out but for go-fuse.
func TestImports(t *testing.T) {
	pkgs, _ := load(t)
	for dir, p := range pkgs {
		if strings.HasPrefix(dir, "bench/") || strings.HasPrefix(dir, "scripts/") {
			continue
		}
		may, ok := allowed[dir]
		if !ok {
			t.Errorf("package %s is not in archcheck's allow-list: add it with what it may import", dir)
			continue
		}
		for im := range p.imports {
			if !slices.Contains(may, im) {
				t.Errorf("%s imports %s, which archcheck's allow-list (ARCHITECTURE.md) does not allow", dir, im)
			}
		}
	}
	for dir := range allowed {
		if pkgs[dir] == nil && dir != "test" {
			t.Errorf("archcheck's allow-list names %s, which is no package: remove it", dir)
		}
	}
	for dir, p := range pkgs {
		if p.imports["go-fuse"] && dir != "fs" && !strings.HasPrefix(dir, "bench/") {
			t.Errorf("%s imports go-fuse; only fs does", dir)
		}
	}
}

// TestOneCallerOfIsURL checks that mount.Locate alone tells a store's URL from a path.
func TestOneCallerOfIsURL(t *testing.T) {
	pkgs, fset := load(t)
	var callers []string
	for dir, p := range pkgs {
		if strings.HasPrefix(dir, "source/") || strings.HasPrefix(dir, "bench/") {
			continue
		}
		for name, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if ok && sel.Sel.Name == "IsURL" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "stores" {
						callers = append(callers, name+":"+strconv.Itoa(fset.Position(sel.Pos()).Line)+" in "+enclosing(f, sel.Pos()))
					}
				}
				return true
			})
		}
	}
	if len(callers) != 1 || !strings.HasPrefix(callers[0], "mount/location.go:") || !strings.HasSuffix(callers[0], " in Locate") {
		t.Errorf("stores.IsURL is called by %v; only mount.Locate should decide what is a URL (the others ask mount.Locate or mount.IsRemote)", callers)
	}
}

// enclosing returns the name of the function of f that holds pos.
func enclosing(f *ast.File, pos token.Pos) string {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= pos && pos < fd.End() {
			return fd.Name.Name
		}
	}
	return "?"
}

// flagLiteral finds a command-line option written out ("--cache-size") in a string.
var flagLiteral = regexp.MustCompile(`(?:^|[^A-Za-z0-9-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)`)

// blockfsFlags returns the names of blockfs's own options: the mount schema's (Name: "...")
// and every flag a command registers (fl.XxxVar(&v, "name", ...)).
func blockfsFlags(pkgs map[string]*pkg) map[string]bool {
	names := map[string]bool{}
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	for _, dir := range []string{"mount", "cmd/blockfs"} {
		for _, f := range pkgs[dir].files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.KeyValueExpr:
					if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Name" {
						if s, ok := str(x.Value); ok {
							names[s] = true
						}
					}
				case *ast.CallExpr:
					sel, ok := x.Fun.(*ast.SelectorExpr)
					if ok && strings.HasSuffix(sel.Sel.Name, "Var") && len(x.Args) >= 2 {
						if s, ok := str(x.Args[1]); ok {
							names[s] = true
						}
					}
				}
				return true
			})
		}
	}
	return names
}

// TestNoFlagLiterals checks that libraries name options through the schema
// (internal/optname.Flag), not by writing the command line's spelling.
func TestNoFlagLiterals(t *testing.T) {
	pkgs, fset := load(t)
	allowed := func(file string) bool {
		return strings.HasPrefix(file, "cmd/") || strings.HasPrefix(file, "bench/") || strings.HasPrefix(file, "scripts/") ||
			strings.HasPrefix(file, "mount/schema") || strings.HasPrefix(file, "internal/optname/") || strings.HasPrefix(file, "internal/dstest/")
	}
	known := blockfsFlags(pkgs)
	if !known["cache-size"] || !known["record-size"] || !known["columns"] {
		t.Fatalf("the option names were not found (%d names): the schema or the commands moved", len(known))
	}
	for _, p := range pkgs {
		for name, f := range p.files {
			if allowed(name) {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range flagLiteral.FindAllStringSubmatch(lit.Value, -1) {
					if known[m[1]] {
						t.Errorf("%s: %s names an option as the command line spells it; use optname.Flag(%q)", fset.Position(lit.Pos()), lit.Value, m[1])
					}
				}
				return true
			})
		}
	}
}

// TestSizes checks that files stay within 600 lines and functions within 80 (split by
// concern when they grow).
func TestSizes(t *testing.T) {
	pkgs, fset := load(t)
	var dirs []string
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		for name, f := range pkgs[dir].files {
			if lines := fset.Position(f.End()).Line; lines > 600 {
				t.Errorf("%s has %d lines; split it by concern (at most 600)", name, lines)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > 80 {
					t.Errorf("%s: %s is %d lines; at most 80", name, fd.Name.Name, n)
				}
			}
		}
	}
}
