package executecode_test

import (
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

const modulePath = "github.com/executecode/executecode"

// layers is the import order docs/architecture.md describes: the CLI over
// the embedders' packages over the facade over the actors over the pump
// over the process layer and the bells. A package may import its own
// layer or lower ones, never a higher one. A package missing here fails
// the test, so a new one has to be placed.
var layers = map[string]int{
	"internal/bell": 0, "internal/privfs": 0, "internal/proc": 0, "internal/jsonerr": 0,
	"internal/proc/internal/sweep": 0, "internal/proctest": 0,
	"internal/mcptest": 0, "internal/shimtest": 1, "kernelworker/internal/frame": 0, "tools": 0,
	"internal/cluster/wire": 0, "internal/cluster/certs": 0, "internal/cluster/transport": 0,
	"internal/cluster/membership": 0, "internal/cluster/membership/etcdtest": 0,

	"privatetmp": 1, "telemetry": 1, "shimpy": 1, "config": 1,
	"approval": 1, "mcpsource": 1,

	"pump": 2,

	"kernelworker": 3, "registry": 3, "introspect": 3,
	"internal/cluster/kernelhost": 3, "internal/cluster/placement": 3,

	"actors": 4,

	"": 5, // the facade

	"mcpserve": 6,

	"cmd/execute-code": 7, "integration": 7,
}

func TestPackagesImportOnlyTheirOwnLayerOrLower(t *testing.T) {
	imports := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); path != "." && (base == "testdata" || strings.HasPrefix(base, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." {
			pkg = ""
		}
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == modulePath {
				imports[pkg][""] = true
			} else if rest, ok := strings.CutPrefix(p, modulePath+"/"); ok {
				imports[pkg][rest] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, imports, "", "the facade was not found")

	for pkg, deps := range imports {
		layer, ok := layers[pkg]
		if !assert.True(t, ok, "package %q has no layer: place it in layers", pkg) {
			continue
		}
		for dep := range deps {
			depLayer, ok := layers[dep]
			if !assert.True(t, ok, "package %q (imported by %q) has no layer", dep, pkg) {
				continue
			}
			assert.LessOrEqual(t, depLayer, layer, "%q (layer %d) imports %q (layer %d)", pkg, layer, dep, depLayer)
		}
	}
}
