package executecode_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An embedder builds against the facade without importing protoactor: no
// exported function, method, type or field of the root package may name a
// type of the actor library, or the library's version would become part
// of the embedder's build.
func TestPublicSignaturesCarryNoProtoactorType(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		actorNames := map[string]bool{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(path, "github.com/asynkron/protoactor-go") {
				continue
			}
			local := filepath.Base(path)
			if im.Name != nil {
				local = im.Name.Name
			}
			actorNames[local] = true
		}
		for _, expr := range exportedTypeExprs(f) {
			checked++
			ast.Inspect(expr, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && actorNames[id.Name] {
						assert.Fail(t, "protoactor type in the public API",
							"%s: %s.%s", fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	require.NotZero(t, checked, "no exported declaration was checked")
}

// exportedTypeExprs returns the type expressions an importer of f's
// package can see: exported functions' and exported methods' signatures
// (of exported receivers), exported types' definitions (unexported struct
// fields and interface methods left out) and exported variables' and
// constants' declared types.
func exportedTypeExprs(f *ast.File) []ast.Expr {
	var out []ast.Expr
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
				continue
			}
			out = append(out, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, visibleType(s.Type)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil {
							out = append(out, s.Type)
							break
						}
					}
				}
			}
		}
	}
	return out
}

func exportedReceiver(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// visibleType is t without the unexported fields of a struct or the
// unexported methods of an interface.
func visibleType(t ast.Expr) []ast.Expr {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return []ast.Expr{t}
	}
	var out []ast.Expr
	for _, fld := range fields.List {
		visible := len(fld.Names) == 0 // embedded
		for _, n := range fld.Names {
			visible = visible || n.IsExported()
		}
		if visible {
			out = append(out, fld.Type)
		}
	}
	return out
}

// Every package but the embedder's (executecode, config, tools, telemetry,
// mcpserve and approval, whose Approver half is the embedder's) is the runtime's
// own machinery, and its package comment says so: its exported names
// serve sibling packages and may change in any release.
func TestMachineryPackagesPromiseNoCompatibility(t *testing.T) {
	embedder := map[string]bool{".": true, "config": true, "tools": true, "telemetry": true, "approval": true, "mcpserve": true}
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		base := d.Name()
		if path != "." && (base == "testdata" || strings.HasPrefix(base, ".") || base == "cmd" || base == "integration") {
			return filepath.SkipDir
		}
		if embedder[path] {
			return nil
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		var doc strings.Builder
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			seen[path] = true
			if f.Doc != nil {
				doc.WriteString(f.Doc.Text())
			}
		}
		if seen[path] {
			text := strings.Join(strings.Fields(doc.String()), " ")
			assert.Contains(t, text, "no compatibility promise", "package comment of %s", path)
		}
		return nil
	})
	require.NoError(t, err)
	for _, want := range []string{"actors", "registry", "kernelworker", "kernelworker/internal/frame", "pump", "shimpy", "introspect", "privatetmp", "internal/proc", "internal/bell"} {
		assert.True(t, seen[want], "package %s not checked", want)
	}
}
