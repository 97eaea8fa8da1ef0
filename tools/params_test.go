package tools

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIntegerParametersAcceptWholeNumbersOfAnyEncoding(t *testing.T) {
	s := newSandbox(t, map[string]string{"f.txt": "1\n2\n3\n"})
	read := s.tool(t, NewRead)
	for _, v := range []any{2.0, 2, int64(2), uint8(2), json.Number("2"), json.Number("2.0")} {
		got, err := call(t, read, map[string]any{"path": "f.txt", "limit": v})
		require.NoError(t, err, "%T", v)
		assert.Equal(t, numbered(1, "1", "2")+"\n[... 1 more lines; use offset=3 to continue]", got, "%T", v)
	}
	for _, v := range []any{2.5, json.Number("2.5"), 1e300, "2", []any{2.0}} {
		_, err := call(t, read, map[string]any{"path": "f.txt", "limit": v})
		assert.ErrorIs(t, err, ErrBadParam, "%T %v", v, v)
	}
}

func TestEveryToolRefusesUnknownParameters(t *testing.T) {
	s := newSandbox(t, nil)
	all, err := Builtin(Options{Root: s.root})
	require.NoError(t, err)
	for name, tool := range all {
		_, err := tool.Execute(context.Background(), map[string]any{"bogus": true})
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrBadParam, name)
		assert.Contains(t, err.Error(), `unknown parameter "bogus" for `+name)
	}
}

func TestSymlinkLoopIsAnErrorWithoutHostPaths(t *testing.T) {
	s := newSandbox(t, nil)
	s.symlink(t, "b", "a")
	s.symlink(t, "a", "b")
	_, err := call(t, s.tool(t, NewRead), map[string]any{"path": "a"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), s.root)
	got, err := call(t, s.tool(t, NewLs), map[string]any{})
	require.NoError(t, err)
	assert.Equal(t, lines("a -> b", "b -> a"), got)
}

func TestToolsAreSafeForConcurrentCalls(t *testing.T) {
	s := grepTree(t)
	all, err := Builtin(Options{Root: s.root})
	require.NoError(t, err)
	calls := []struct {
		tool   string
		params map[string]any
	}{
		{"read", map[string]any{"path": "main.go"}},
		{"grep", map[string]any{"pattern": "hello", "context_lines": 1.0}},
		{"find", map[string]any{"pattern": "*.md"}},
		{"ls", map[string]any{"recursive": true}},
	}
	want := make([]string, len(calls))
	for i, c := range calls {
		want[i], err = call(t, all[c.tool], c.params)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for range 8 {
		for i, c := range calls {
			wg.Go(func() {
				got, err := call(t, all[c.tool], c.params)
				assert.NoError(t, err)
				assert.Equal(t, want[i], got)
			})
		}
	}
	wg.Wait()
}

func TestAbsolutePathsInsideTheRootAreShownRelative(t *testing.T) {
	s := newSandbox(t, map[string]string{"d/": ""})
	_, err := call(t, s.tool(t, NewRead), map[string]any{"path": filepath.Join(s.root, "d", "missing.txt")})
	require.Error(t, err)
	assert.Equal(t, "no such file or directory: d/missing.txt", err.Error())
}

// Builtin makes exactly the allowlisted helpers, each under its own name:
// the allowlist, the constructors and Tool.Name agree.
func TestBuiltinMakesEveryAllowlistedHelperUnderItsOwnName(t *testing.T) {
	s := newSandbox(t, nil)
	all, err := Builtin(Options{Root: s.root})
	require.NoError(t, err)
	assert.Len(t, all, len(Allowlist))
	for _, name := range Allowlist {
		if assert.Contains(t, all, name) {
			assert.Equal(t, name, all[name].Name())
		}
	}
}
