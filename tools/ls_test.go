package tools

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lsTree(t *testing.T) sandbox {
	s := newSandbox(t, map[string]string{
		"b.txt":          "bee",
		"a.txt":          "a",
		"src/main.go":    "package main\n",
		"src/lib/l.go":   "package lib\n",
		".env":           "SECRET=1",
		".config/c.toml": "",
		"empty/":         "",
		".gitignore":     "src/\n",
	})
	s.symlink(t, "src/main.go", "link-in")
	s.symlink(t, filepath.Join(s.outside, "secret.txt"), "link-out")
	return s
}

func TestLsListsEntries(t *testing.T) {
	s := lsTree(t)
	ls := s.tool(t, NewLs)
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"sorted, dirs with slash, symlinks with targets, no dot entries",
			map[string]any{},
			lines("a.txt", "b.txt", "empty/", "link-in -> src/main.go", "link-out -> "+filepath.Join(s.outside, "secret.txt"), "src/")},
		{"all shows dot entries",
			map[string]any{"all": true},
			lines(".config/", ".env", ".gitignore", "a.txt", "b.txt", "empty/", "link-in -> src/main.go", "link-out -> "+filepath.Join(s.outside, "secret.txt"), "src/")},
		{"subdirectory",
			map[string]any{"path": "src"},
			lines("lib/", "main.go")},
		{"recursive lists the tree relative to path, ignoring .gitignore",
			map[string]any{"path": "src", "recursive": true},
			lines("lib/", "lib/l.go", "main.go")},
		{"max_depth limits and implies recursion",
			map[string]any{"max_depth": 2.0},
			lines("a.txt", "b.txt", "empty/", "link-in -> src/main.go", "link-out -> "+filepath.Join(s.outside, "secret.txt"), "src/", "src/lib/", "src/main.go")},
		{"file path lists the file",
			map[string]any{"path": "src/main.go"},
			"src/main.go"},
		{"empty directory",
			map[string]any{"path": "empty"},
			"(empty directory)"},
		{"cap with a count of what is left",
			map[string]any{"max_entries": 2.0},
			lines("a.txt", "b.txt", "[... 4 more entries not shown; raise max_entries to see them]")},
		{"recursive cap",
			map[string]any{"recursive": true, "max_entries": 3.0},
			lines("a.txt", "b.txt", "empty/", "[listing capped at 3 entries]")},
		{"a symlink path lists the name given",
			map[string]any{"path": "link-in"},
			"link-in"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(t, ls, tc.params)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLsLongShowsModeSizeAndTime(t *testing.T) {
	s := lsTree(t)
	require.NoError(t, os.Chmod(filepath.Join(s.root, "b.txt"), 0o600))
	got, err := call(t, s.tool(t, NewLs), map[string]any{"long": true})
	require.NoError(t, err)
	rows := strings.Split(got, "\n")
	require.Len(t, rows, 6)
	row := regexp.MustCompile(`^([-dl][-rwx]{9}) +(\d+) (\d{4}-\d\d-\d\d \d\d:\d\d) (.+)$`)
	want := []struct{ mode, size, name string }{
		{"-rw-r--r--", "1", "a.txt"},
		{"-rw-------", "3", "b.txt"},
		{"drwxr-xr-x", "", "empty/"},
		{"lrwxrwxrwx", "", "link-in -> src/main.go"},
		{"lrwxrwxrwx", "", "link-out -> " + filepath.Join(s.outside, "secret.txt")},
		{"drwxr-xr-x", "", "src/"},
	}
	for i, w := range want {
		m := row.FindStringSubmatch(rows[i])
		require.NotNil(t, m, "row %q", rows[i])
		assert.Equal(t, w.mode, m[1], rows[i])
		if w.size != "" {
			assert.Equal(t, w.size, m[2], rows[i])
		}
		assert.Equal(t, w.name, m[4], rows[i])
	}
}

func TestLsRefuses(t *testing.T) {
	s := lsTree(t)
	s.symlink(t, s.outside, "outdir")
	ls := s.tool(t, NewLs)
	tests := []struct {
		name    string
		params  map[string]any
		kind    error
		message string
	}{
		{"missing", map[string]any{"path": "nope"}, ErrNotFound, "no such file or directory: nope"},
		{"escape via dot-dot", map[string]any{"path": "../outside"}, ErrEscapes, `path "../outside" escapes the tool root`},
		{"escape via absolute path", map[string]any{"path": s.outside}, ErrEscapes, "escapes the tool root"},
		{"escape via symlink", map[string]any{"path": "outdir"}, ErrEscapes, `path "outdir" escapes the tool root`},
		{"escape via symlink to a file", map[string]any{"path": "link-out"}, ErrEscapes, `path "link-out" escapes the tool root`},
		{"all as string", map[string]any{"all": "yes"}, ErrBadParam, `"all" of ls must be a boolean, got string "yes"`},
		{"long as number", map[string]any{"long": 1.0}, ErrBadParam, `"long" of ls must be a boolean`},
		{"recursive as null is the default", map[string]any{"recursive": nil, "path": "nope"}, ErrNotFound, "no such file"},
		{"max_depth fractional", map[string]any{"max_depth": 1.5}, ErrBadParam, `"max_depth" of ls must be an integer, got number 1.5`},
		{"max_entries zero", map[string]any{"max_entries": 0.0}, ErrBadParam, `"max_entries" of ls must be at least 1`},
		{"path as object", map[string]any{"path": map[string]any{}}, ErrBadParam, `"path" of ls must be a string, got an object`},
		{"unknown parameter", map[string]any{"hidden": true}, ErrBadParam, `unknown parameter "hidden" for ls`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, ls, tc.params)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.message)
			assert.NotContains(t, err.Error(), s.root)
		})
	}
}

func TestLsReportsUnreadableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory")
	}
	s := newSandbox(t, map[string]string{"locked/x": "", "open/y": ""})
	locked := filepath.Join(s.root, "locked")
	require.NoError(t, os.Chmod(locked, 0))
	t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
	ls := s.tool(t, NewLs)
	got, err := call(t, ls, map[string]any{"recursive": true})
	require.NoError(t, err)
	assert.Equal(t, lines("locked/", "open/", "open/y", "[1 directory could not be read and skipped]"), got)
	_, err = call(t, ls, map[string]any{"path": "locked"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "locked: permission denied")
}
