package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func grepTree(t *testing.T) sandbox {
	return newSandbox(t, map[string]string{
		"main.go":         "package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n",
		"util.go":         "package main\n\n// hello helper\nfunc helper() {}\n",
		"README.md":       "# Hello project\nsay hello\n",
		"docs/guide.md":   "Intro\nhello from docs\nOutro\n",
		"docs/api/ref.md": "ref hello\n",
		"build/out.go":    "package build // hello\n",
		"logs/app.log":    "hello log\n",
		"logs/keep.log":   "hello kept\n",
		".gitignore":      "build/\n*.log\n!keep.log\n",
		"docs/.gitignore": "api/\n",
		".git/config":     "hello git\n",
		".github/ci.yml":  "hello ci\n",
		"bin/tool":        "hello\x00binary",
		"regex.txt":       "a.b\naxb\n",
		"context.txt":     "1\n2\nmatch one\n4\n5\n6\n7\nmatch two\n9\nmatch three\n11\n",
	})
}

func TestGrepFindsMatches(t *testing.T) {
	s := grepTree(t)
	grep := s.tool(t, NewGrep)
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"case-sensitive by default, gitignore honoured, binaries and .git skipped",
			map[string]any{"pattern": "hello"},
			lines(".github/ci.yml:1:hello ci", "README.md:2:say hello", "docs/guide.md:2:hello from docs", "logs/keep.log:1:hello kept", "util.go:3:// hello helper")},
		{"case-insensitive",
			map[string]any{"pattern": "HELLO", "case_sensitive": false, "path": "docs"},
			lines("docs/guide.md:2:hello from docs")},
		{"regexp syntax",
			map[string]any{"pattern": `^func \w+\(\)`},
			lines("main.go:3:func main() {", "util.go:4:func helper() {}")},
		{"literal",
			map[string]any{"pattern": "a.b", "literal": true},
			lines("regex.txt:1:a.b")},
		{"regexp dot matches any char",
			map[string]any{"pattern": "a.b", "path": "regex.txt"},
			lines("regex.txt:1:a.b", "regex.txt:2:axb")},
		{"glob on file names",
			map[string]any{"pattern": "hello", "glob": "*.md", "case_sensitive": false},
			lines("README.md:1:# Hello project", "README.md:2:say hello", "docs/guide.md:2:hello from docs")},
		{"glob on relative paths",
			map[string]any{"pattern": "hello", "glob": "docs/**"},
			lines("docs/guide.md:2:hello from docs")},
		{"glob relative to the search path",
			map[string]any{"pattern": "hello", "path": "docs", "glob": "*.md"},
			lines("docs/guide.md:2:hello from docs")},
		{"explicitly named ignored file is searched",
			map[string]any{"pattern": "hello", "path": "build/out.go"},
			lines("build/out.go:1:package build // hello")},
		{"explicitly named ignored directory is searched",
			map[string]any{"pattern": "hello", "path": "build"},
			lines("build/out.go:1:package build // hello")},
		{"nested .gitignore applies below its directory only",
			map[string]any{"pattern": "ref", "path": "docs"},
			"No matches found."},
		{"no matches is not an error",
			map[string]any{"pattern": "zebra"},
			"No matches found."},
		{"max_results caps with a note",
			map[string]any{"pattern": "hello", "max_results": 2.0},
			lines(".github/ci.yml:1:hello ci", "README.md:2:say hello", "[results capped at 2 matches]")},
		{"exactly max_results matches has no note",
			map[string]any{"pattern": "hello", "path": "docs", "max_results": 1.0},
			lines("docs/guide.md:2:hello from docs")},
		{"context lines and group separators",
			map[string]any{"pattern": "match", "path": "context.txt", "context_lines": 1.0},
			lines(
				"context.txt-2-2", "context.txt:3:match one", "context.txt-4-4",
				"--",
				"context.txt-7-7", "context.txt:8:match two", "context.txt-9-9", "context.txt:10:match three", "context.txt-11-11")},
		{"context groups across files",
			map[string]any{"pattern": "hello", "path": "docs", "glob": "*.md", "context_lines": 5.0, "case_sensitive": false},
			lines("docs/guide.md-1-Intro", "docs/guide.md:2:hello from docs", "docs/guide.md-3-Outro")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(t, grep, tc.params)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestGrepSeparatesGroupsInDifferentFiles(t *testing.T) {
	s := newSandbox(t, map[string]string{"a.txt": "x\nhit\n", "b.txt": "hit\ny\n"})
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "hit", "context_lines": 1.0})
	require.NoError(t, err)
	assert.Equal(t, lines("a.txt-1-x", "a.txt:2:hit", "--", "b.txt:1:hit", "b.txt-2-y"), got)
}

func TestGrepCutsLongLines(t *testing.T) {
	s := newSandbox(t, map[string]string{"min.js": strings.Repeat("a", 5000) + "needle" + "\n"})
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle"})
	require.NoError(t, err)
	assert.Equal(t, "min.js:1:"+strings.Repeat("a", 2000)+" [... line truncated at 2000 chars]", got)
}

func TestGrepCapsOutputBytesWithNote(t *testing.T) {
	line := strings.Repeat("z", 1990) + "\n"
	s := newSandbox(t, map[string]string{"big.txt": strings.Repeat(line, 1000)})
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "z", "max_results": 5000.0})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(got), maxOutputBytes+100)
	assert.True(t, strings.HasSuffix(got, fmt.Sprintf("[output capped at %d bytes]", maxOutputBytes)), got[len(got)-80:])
}

func TestGrepRefuses(t *testing.T) {
	s := grepTree(t)
	s.symlink(t, "../outside", "out-link")
	grep := s.tool(t, NewGrep)
	tests := []struct {
		name    string
		params  map[string]any
		kind    error
		message string
	}{
		{"bad regexp", map[string]any{"pattern": "a(b"}, ErrBadParam, "invalid pattern \"a(b\": missing closing ): `a(b`"},
		{"missing pattern", map[string]any{"path": "."}, ErrBadParam, `parameter "pattern" of grep is required`},
		{"pattern not a string", map[string]any{"pattern": []any{"a"}}, ErrBadParam, `"pattern" of grep must be a string, got a list`},
		{"bad glob", map[string]any{"pattern": "a", "glob": "[a"}, ErrBadParam, `parameter "glob" of grep is not a valid glob`},
		{"case_sensitive as string", map[string]any{"pattern": "a", "case_sensitive": "false"}, ErrBadParam, `"case_sensitive" of grep must be a boolean, got string "false"`},
		{"literal as number", map[string]any{"pattern": "a", "literal": 1.0}, ErrBadParam, `"literal" of grep must be a boolean`},
		{"context_lines negative", map[string]any{"pattern": "a", "context_lines": -1.0}, ErrBadParam, `"context_lines" of grep must be at least 0`},
		{"max_results zero", map[string]any{"pattern": "a", "max_results": 0.0}, ErrBadParam, `"max_results" of grep must be at least 1`},
		{"unknown parameters", map[string]any{"pattern": "a", "ignore_case": true, "foo": 1.0}, ErrBadParam, `unknown parameters "foo", "ignore_case" for grep`},
		{"missing path", map[string]any{"pattern": "a", "path": "nope"}, ErrNotFound, "no such file or directory: nope"},
		{"escape via dot-dot", map[string]any{"pattern": "a", "path": ".."}, ErrEscapes, `path ".." escapes the tool root`},
		{"escape via absolute path", map[string]any{"pattern": "a", "path": s.outside}, ErrEscapes, "escapes the tool root"},
		{"escape via symlink", map[string]any{"pattern": "a", "path": "out-link"}, ErrEscapes, `path "out-link" escapes the tool root`},
		{"named binary file", map[string]any{"pattern": "hello", "path": "bin/tool"}, ErrBinary, "bin/tool is a binary file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, grep, tc.params)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.message)
			assert.NotContains(t, err.Error(), s.root)
		})
	}
}

func TestGrepDoesNotFollowSymlinksOutOfTheRoot(t *testing.T) {
	s := newSandbox(t, map[string]string{"a.txt": "nothing\n"})
	s.symlink(t, filepath.Join(s.outside, "secret.txt"), "leak.txt")
	s.symlink(t, s.outside, "leakdir")
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "secret"})
	require.NoError(t, err)
	assert.Equal(t, "No matches found.", got)
}

// bigTree makes a tree large enough that walking it takes many entries.
func bigTree(t *testing.T) sandbox {
	t.Helper()
	s := newSandbox(t, nil)
	for d := range 40 {
		dir := filepath.Join(s.root, fmt.Sprintf("d%02d", d))
		require.NoError(t, os.Mkdir(dir, 0o755))
		for f := range 50 {
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), []byte("needle\n"), 0o644))
		}
	}
	return s
}

// cancelAfter is a context that reports cancellation after its Err has
// been consulted n times: it proves a walk checks ctx as it goes without
// relying on timing.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

func TestWalksStopWhenTheContextIsCancelled(t *testing.T) {
	s := bigTree(t)
	tests := []struct {
		tool   func(Options) (Tool, error)
		params map[string]any
	}{
		{NewGrep, map[string]any{"pattern": "needle", "max_results": 100000.0}},
		{NewFind, map[string]any{"pattern": "*.txt", "max_results": 100000.0}},
		{NewLs, map[string]any{"recursive": true, "max_entries": 100000.0}},
	}
	for _, tc := range tests {
		tool := s.tool(t, tc.tool)
		t.Run(tool.Name(), func(t *testing.T) {
			_, err := callCtx(&cancelAfter{Context: context.Background(), n: 100}, t, tool, tc.params)
			assert.ErrorIs(t, err, context.Canceled)

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err = callCtx(ctx, t, tool, tc.params)
			assert.ErrorIs(t, err, context.Canceled)

			_, err = call(t, tool, tc.params)
			assert.NoError(t, err, "the same call completes without cancellation")
		})
	}
}
