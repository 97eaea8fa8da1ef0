package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoreCases are trees with .gitignore files and the files that are not
// ignored in them, as git itself decides (TestIgnoreSemanticsMatchGit
// asks git when it is installed).
var ignoreCases = []struct {
	name  string
	files map[string]string
	kept  []string
}{
	{"negation undoes an earlier match",
		map[string]string{".gitignore": "*.log\n!keep.log\n", "a.log": "", "keep.log": "", "sub/b.log": "", "sub/keep.log": "", "x.txt": ""},
		[]string{".gitignore", "keep.log", "sub/keep.log", "x.txt"}},
	{"a trailing slash matches directories only",
		map[string]string{".gitignore": "build/\n", "build/x": "", "sub/build/y": "", "other/build": "", "build2": ""},
		[]string{".gitignore", "build2", "other/build"}},
	{"a leading slash anchors to the file's directory",
		map[string]string{".gitignore": "/top.txt\n", "top.txt": "", "sub/top.txt": ""},
		[]string{".gitignore", "sub/top.txt"}},
	{"a slash in the middle anchors too",
		map[string]string{".gitignore": "docs/api\n", "docs/api/ref.md": "", "docs/guide.md": "", "x/docs/api/ref.md": ""},
		[]string{".gitignore", "docs/guide.md", "x/docs/api/ref.md"}},
	{"double stars",
		map[string]string{".gitignore": "**/gen/*.go\na/**/z.txt\nlogs/**\n", "gen/a.go": "", "p/q/gen/b.go": "", "gen/c.txt": "", "a/z.txt": "", "a/b/c/z.txt": "", "b/z.txt": "", "logs/x/y.log": "", "logsx/y.log": ""},
		[]string{".gitignore", "b/z.txt", "gen/c.txt", "logsx/y.log"}},
	{"a deeper file overrides its parent's",
		map[string]string{".gitignore": "*.tmp\n", "a.tmp": "", "sub/.gitignore": "!keep.tmp\n", "sub/keep.tmp": "", "sub/other.tmp": "", "keep.tmp": ""},
		[]string{".gitignore", "sub/.gitignore", "sub/keep.tmp"}},
	{"a nested file's patterns are relative to its directory",
		map[string]string{"sub/.gitignore": "/only.txt\nin/*.md\n", "sub/only.txt": "", "sub/deeper/only.txt": "", "only.txt": "", "sub/in/a.md": "", "in/a.md": ""},
		[]string{"in/a.md", "only.txt", "sub/.gitignore", "sub/deeper/only.txt"}},
	{"comments, blank lines, trailing spaces and CRLF",
		map[string]string{".gitignore": "# comment.txt\n\n   \nfoo.txt   \r\nbar.txt\r\n", "# comment.txt": "", "foo.txt": "", "bar.txt": "", "baz.txt": ""},
		[]string{"# comment.txt", ".gitignore", "baz.txt"}},
	{"escaped hash and bang",
		map[string]string{".gitignore": "\\#hash.txt\n\\!bang.txt\n", "#hash.txt": "", "!bang.txt": "", "plain.txt": ""},
		[]string{".gitignore", "plain.txt"}},
	{"character classes and single-character wildcards",
		map[string]string{".gitignore": "file[0-9].txt\n?.md\n", "file1.txt": "", "filex.txt": "", "a.md": "", "ab.md": ""},
		[]string{".gitignore", "ab.md", "filex.txt"}},
	{"a file below an excluded directory cannot be re-included",
		map[string]string{".gitignore": "dir/\n!dir/keep.txt\n", "dir/keep.txt": "", "dir/x.txt": "", "y.txt": ""},
		[]string{".gitignore", "y.txt"}},
}

func keptByFind(t *testing.T, s sandbox) []string {
	t.Helper()
	got, err := call(t, s.tool(t, NewFind), map[string]any{"pattern": "*", "type": "f", "hidden": true})
	require.NoError(t, err)
	if got == "No files found." {
		return nil
	}
	return splitLines(got)
}

func TestIgnoreFilesFollowGitsRules(t *testing.T) {
	for _, tc := range ignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t, tc.files)
			assert.Equal(t, tc.kept, keptByFind(t, s))
		})
	}
}

// The expectations above are git's own answers: git ls-files lists the
// untracked files it does not ignore.
func TestIgnoreSemanticsMatchGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	for _, tc := range ignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t, tc.files)
			run := func(args ...string) string {
				cmd := exec.Command(git, args...)
				cmd.Dir = s.root
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, string(out))
				return string(out)
			}
			run("init", "-q")
			out := run("-c", "core.quotePath=false", "ls-files", "--others", "--exclude-standard", "-z")
			kept := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
			slices.Sort(kept)
			assert.Equal(t, tc.kept, kept)
		})
	}
}

// Naming an ignored directory as path searches it; its own ignore file
// still applies below it.
func TestNamingAnIgnoredDirectorySearchesIt(t *testing.T) {
	s := newSandbox(t, map[string]string{
		".gitignore":        "vendor/\n",
		"vendor/lib.go":     "needle\n",
		"vendor/.gitignore": "*.gen\n",
		"vendor/x.gen":      "needle\n",
		"main.go":           "needle\n",
	})
	grep := s.tool(t, NewGrep)
	got, err := call(t, grep, map[string]any{"pattern": "needle"})
	require.NoError(t, err)
	assert.Equal(t, "main.go:1:needle", got)
	got, err = call(t, grep, map[string]any{"pattern": "needle", "path": "vendor"})
	require.NoError(t, err)
	assert.Equal(t, "vendor/lib.go:1:needle", got)
}

func writeBig(t *testing.T, s sandbox, name string, size int, line string) {
	t.Helper()
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, line, i)
	}
	p := filepath.Join(s.root, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(b.String()[:size]), 0o644))
}

// An ignore file over 1 MiB is skipped unread, with a note naming it; the
// search goes on without its patterns.
func TestIgnoreFileOverTheSizeCapIsSkippedWithANote(t *testing.T) {
	s := newSandbox(t, map[string]string{"a.txt": "needle\n", "sub/b.txt": "needle\n"})
	writeBig(t, s, "sub/.gitignore", maxIgnoreFileBytes+1, "b.txt\ndir%d/\n")
	writeBig(t, s, ".gitignore", maxIgnoreFileBytes, "# just under the cap %d\n")
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle"})
	require.NoError(t, err)
	assert.Equal(t, lines(
		"a.txt:1:needle",
		"sub/b.txt:1:needle",
		"[sub/.gitignore skipped: 1048577 bytes, over the 1 MiB limit for ignore files]",
	), got)
}

// Patterns are charged against the search's budget before they are
// parsed: a file whose patterns would not fit is skipped with a note, and
// what a directory's file held is given back when the walk leaves it.
func TestIgnorePatternsOverTheSearchBudgetAreSkippedWithANote(t *testing.T) {
	s := newSandbox(t, map[string]string{
		"a/x.txt": "needle\n", "a/deep/x.txt": "needle\n",
		"b/x.txt": "needle\n",
	})
	// Short lines are the costly shape: ~100 bytes of heap per 3 bytes.
	writeBig(t, s, "a/.gitignore", 15000*6, "p%04d\n")
	writeBig(t, s, "a/deep/.gitignore", 10000*6, "q%04d\n")
	writeBig(t, s, "b/.gitignore", 15000*6-6, "r%04d\n")
	costA, _ := ignoreCost(readText(t, s, "a/.gitignore"))
	costDeep, _ := ignoreCost(readText(t, s, "a/deep/.gitignore"))
	costB, _ := ignoreCost(readText(t, s, "b/.gitignore"))
	require.Less(t, costA, maxIgnoreCost)
	require.Less(t, costB, maxIgnoreCost)
	require.Greater(t, costA+costDeep, maxIgnoreCost)
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle"})
	require.NoError(t, err)
	assert.Equal(t, lines(
		"a/deep/x.txt:1:needle",
		"a/x.txt:1:needle",
		"b/x.txt:1:needle",
		"[a/deep/.gitignore skipped: its patterns need about "+sizeText(costDeep)+", more than the 2 MiB one search may hold for ignore files]",
	), got, "b/.gitignore fits once a/ was left")
}

func readText(t *testing.T, s sandbox, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(name)))
	require.NoError(t, err)
	return string(b)
}

// Matching against a long pattern list is CPU-bound: it stops when ctx
// ends.
func TestIgnoreMatchingStopsWhenTheContextEnds(t *testing.T) {
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "never%d/**/*.x\n", i)
	}
	text := b.String()
	_, n := ignoreCost(text)
	f, err := parseIgnore(context.Background(), text, n)
	require.NoError(t, err)
	stack := ignoreStack{f}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = stack.ignored(ctx, []string{"a", "b.txt"}, false)
	assert.ErrorIs(t, err, context.Canceled)
	ignored, err := stack.ignored(context.Background(), []string{"a", "b.txt"}, false)
	require.NoError(t, err)
	assert.False(t, ignored)
}

// The cost estimate charged to the budget covers what parsing really
// allocates, for the shapes a script could plant, and is not so far above
// it that honest files get skipped.
func TestIgnoreCostCoversTheHeap(t *testing.T) {
	shapes := map[string]string{
		"typical":       "dir%d/file.txt\n",
		"short":         "%d\n",
		"globs":         "**/*.o%d\n",
		"many segments": "a/b/c/d/e/f/g/h/%d\n",
		"negations":     "!keep%d/\n",
		"comments":      "# %d\n",
	}
	for name, line := range shapes {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			for i := 0; b.Len() < 256<<10; i++ {
				fmt.Fprintf(&b, line, i)
			}
			text := b.String()
			estimate, n := ignoreCost(text)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			f, err := parseIgnore(context.Background(), text, n)
			runtime.ReadMemStats(&after)
			require.NoError(t, err)
			patterns := f.patterns
			allocated := int(after.TotalAlloc-before.TotalAlloc) + len(text)
			assert.GreaterOrEqual(t, estimate, allocated, "%d patterns", len(patterns))
			assert.Less(t, estimate, 2*allocated, "%d patterns", len(patterns))
			t.Logf("%s: %d bytes of text, %d patterns, %d bytes allocated, %d estimated", name, len(text), len(patterns), allocated, estimate)
		})
	}
}
