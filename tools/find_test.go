package tools

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func findTree(t *testing.T) sandbox {
	return newSandbox(t, map[string]string{
		"main.go":             "",
		"go.mod":              "",
		"cmd/app/main.go":     "",
		"cmd/app/app_test.go": "",
		"internal/x/x.go":     "",
		"internal/x/x.txt":    "",
		".hidden/h.go":        "",
		".env":                "",
		"vendor/v.go":         "",
		".gitignore":          "vendor/\n*.tmp\n",
		"scratch.tmp":         "",
		".git/HEAD":           "",
		"empty/":              "",
	})
}

func TestFindListsMatchingPaths(t *testing.T) {
	s := findTree(t)
	s.symlink(t, "main.go", "link.go")
	find := s.tool(t, NewFind)
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"name pattern at any depth, sorted, ignored and hidden skipped",
			map[string]any{"pattern": "*.go"},
			lines("cmd/app/app_test.go", "cmd/app/main.go", "internal/x/x.go", "link.go", "main.go")},
		{"path pattern",
			map[string]any{"pattern": "cmd/**/main.go"},
			lines("cmd/app/main.go")},
		{"doublestar matches directories too, with a trailing slash",
			map[string]any{"pattern": "**"},
			lines("cmd/", "cmd/app/", "cmd/app/app_test.go", "cmd/app/main.go", "empty/", "go.mod",
				"internal/", "internal/x/", "internal/x/x.go", "internal/x/x.txt", "link.go", "main.go")},
		{"type dir",
			map[string]any{"pattern": "*", "type": "d"},
			lines("cmd/", "cmd/app/", "empty/", "internal/", "internal/x/")},
		{"type file excludes symlinks",
			map[string]any{"pattern": "*.go", "type": "file"},
			lines("cmd/app/app_test.go", "cmd/app/main.go", "internal/x/x.go", "main.go")},
		{"max_depth 1 is the direct children",
			map[string]any{"pattern": "*", "max_depth": 1.0},
			lines("cmd/", "empty/", "go.mod", "internal/", "link.go", "main.go")},
		{"path narrows the search; output stays root-relative",
			map[string]any{"pattern": "*", "path": "internal/x"},
			lines("internal/x/x.go", "internal/x/x.txt")},
		{"pattern with a slash is relative to path",
			map[string]any{"pattern": "x/*.txt", "path": "internal"},
			lines("internal/x/x.txt")},
		{"hidden entries on request, .git never",
			map[string]any{"pattern": "*", "hidden": true, "max_depth": 1.0},
			lines(".env", ".gitignore", ".hidden/", "cmd/", "empty/", "go.mod", "internal/", "link.go", "main.go")},
		{"hidden entries are searched into",
			map[string]any{"pattern": "h.go", "hidden": true},
			lines(".hidden/h.go")},
		{"nothing found",
			map[string]any{"pattern": "*.rs"},
			"No files found."},
		{"cap with a note",
			map[string]any{"pattern": "*.go", "max_results": 2.0},
			lines("cmd/app/app_test.go", "cmd/app/main.go", "[results capped at 2 paths]")},
		{"explicitly named ignored directory is searched",
			map[string]any{"pattern": "*.go", "path": "vendor"},
			lines("vendor/v.go")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(t, find, tc.params)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFindRefuses(t *testing.T) {
	s := findTree(t)
	s.symlink(t, s.outside, "out")
	find := s.tool(t, NewFind)
	tests := []struct {
		name    string
		params  map[string]any
		kind    error
		message string
	}{
		{"missing pattern", map[string]any{}, ErrBadParam, `parameter "pattern" of find is required`},
		{"bad pattern", map[string]any{"pattern": "[z"}, ErrBadParam, `parameter "pattern" of find is not a valid glob: "[z"`},
		{"bad type", map[string]any{"pattern": "*", "type": "l"}, ErrBadParam, `parameter "type" of find must be "f"/"file" or "d"/"dir", got "l"`},
		{"type not a string", map[string]any{"pattern": "*", "type": 1.0}, ErrBadParam, `"type" of find must be a string`},
		{"max_depth zero", map[string]any{"pattern": "*", "max_depth": 0.0}, ErrBadParam, `"max_depth" of find must be at least 1`},
		{"max_results as string", map[string]any{"pattern": "*", "max_results": "10"}, ErrBadParam, `"max_results" of find must be an integer`},
		{"hidden as number", map[string]any{"pattern": "*", "hidden": 0.0}, ErrBadParam, `"hidden" of find must be a boolean`},
		{"unknown parameter", map[string]any{"pattern": "*", "name": "x"}, ErrBadParam, `unknown parameter "name" for find`},
		{"missing path", map[string]any{"pattern": "*", "path": "nope/deeper"}, ErrNotFound, "no such file or directory: nope/deeper"},
		{"path is a file", map[string]any{"pattern": "*", "path": "go.mod"}, ErrBadParam, "go.mod is not a directory"},
		{"escape via dot-dot", map[string]any{"pattern": "*", "path": "cmd/../.."}, ErrEscapes, `path "cmd/../.." escapes the tool root`},
		{"escape via absolute path", map[string]any{"pattern": "*", "path": "/"}, ErrEscapes, `path "/" escapes the tool root`},
		{"escape via symlink", map[string]any{"pattern": "*", "path": "out"}, ErrEscapes, `path "out" escapes the tool root`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, find, tc.params)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.message)
			assert.NotContains(t, err.Error(), s.root)
		})
	}
}

func TestFindDefaultCapIsAThousand(t *testing.T) {
	s := bigTree(t)
	got, err := call(t, s.tool(t, NewFind), map[string]any{"pattern": "*.txt"})
	require.NoError(t, err)
	assert.Contains(t, got, fmt.Sprintf("[results capped at %d paths]", defaultFindMaxResults))
	assert.Len(t, splitLines(got), defaultFindMaxResults+1)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	out := []string{}
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
