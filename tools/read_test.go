package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func numbered(from int, texts ...string) string {
	out := make([]string, len(texts))
	for i, s := range texts {
		out[i] = fmt.Sprintf("%6d\t%s", from+i, s)
	}
	return strings.Join(out, "\n")
}

func TestReadShowsNumberedLines(t *testing.T) {
	many := strings.Repeat("x\n", 2500)
	long := strings.Repeat("é", 2500)
	s := newSandbox(t, map[string]string{
		"notes.txt":     "alpha\nbeta\ngamma\ndelta\n",
		"no-eol.txt":    "one\ntwo",
		"crlf.txt":      "a\r\nb\r\n",
		"empty.txt":     "",
		"many.txt":      many,
		"long.txt":      long + "\nshort\n",
		"latin1.txt":    "caf\xe9 cr\xe8me\n",
		"sub/deep.txt":  "deep\n",
		"blank-end.txt": "a\n\n",
	})
	read := s.tool(t, NewRead)
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"whole file", map[string]any{"path": "notes.txt"}, numbered(1, "alpha", "beta", "gamma", "delta")},
		{"offset and limit", map[string]any{"path": "notes.txt", "offset": 2.0, "limit": 2.0},
			numbered(2, "beta", "gamma") + "\n[... 1 more lines; use offset=4 to continue]"},
		{"offset to the end", map[string]any{"path": "notes.txt", "offset": 4.0}, numbered(4, "delta")},
		{"nil params are defaults", map[string]any{"path": "notes.txt", "offset": nil, "limit": nil}, numbered(1, "alpha", "beta", "gamma", "delta")},
		{"last line without newline", map[string]any{"path": "no-eol.txt"}, numbered(1, "one", "two")},
		{"carriage returns dropped", map[string]any{"path": "crlf.txt"}, numbered(1, "a", "b")},
		{"empty line at the end kept", map[string]any{"path": "blank-end.txt"}, numbered(1, "a", "")},
		{"empty file", map[string]any{"path": "empty.txt"}, "(empty file)"},
		{"nested path", map[string]any{"path": "sub/deep.txt"}, numbered(1, "deep")},
		{"dot segments inside the root", map[string]any{"path": "sub/../notes.txt", "limit": 1.0},
			numbered(1, "alpha") + "\n[... 3 more lines; use offset=2 to continue]"},
		{"absolute path inside the root", map[string]any{"path": filepath.Join(s.root, "sub", "deep.txt")}, numbered(1, "deep")},
		{"default limit is 2000 lines", map[string]any{"path": "many.txt"},
			numbered(1, strings.Split(strings.Repeat("x\n", 2000), "\n")[:2000]...) + "\n[... 500 more lines; use offset=2001 to continue]"},
		{"long lines are cut", map[string]any{"path": "long.txt"},
			numbered(1, strings.Repeat("é", 2000)+" [... line truncated at 2000 chars]", "short")},
		{"mostly valid latin-1 is text", map[string]any{"path": "latin1.txt"}, numbered(1, "caf\uFFFD cr\uFFFDme")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(t, read, tc.params)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadThroughSymlinkInsideRoot(t *testing.T) {
	s := newSandbox(t, map[string]string{"real/file.txt": "hello\n"})
	s.symlink(t, "real/file.txt", "rel-link")
	s.symlink(t, filepath.Join(s.root, "real"), "abs-dir-link")
	read := s.tool(t, NewRead)
	for _, p := range []string{"rel-link", "abs-dir-link/file.txt"} {
		got, err := call(t, read, map[string]any{"path": p})
		require.NoError(t, err, p)
		assert.Equal(t, numbered(1, "hello"), got, p)
	}
}

func TestReadRootGivenThroughSymlink(t *testing.T) {
	s := newSandbox(t, map[string]string{"a.txt": "a\n"})
	link := filepath.Join(filepath.Dir(s.root), "root-link")
	require.NoError(t, os.Symlink(s.root, link))
	read, err := NewRead(Options{Root: link})
	require.NoError(t, err)
	for _, p := range []string{"a.txt", filepath.Join(link, "a.txt"), filepath.Join(s.root, "a.txt")} {
		got, err := call(t, read, map[string]any{"path": p})
		require.NoError(t, err, p)
		assert.Equal(t, numbered(1, "a"), got)
	}
}

func TestReadRefuses(t *testing.T) {
	s := newSandbox(t, map[string]string{
		"notes.txt":  "a\nb\n",
		"bin.dat":    "text\x00more",
		"noise.dat":  string([]byte{0xff, 0xfe, 0xfa, 0xc0, 0x80, 0xff, 'a', 0xfe, 0xfd, 0xfc}),
		"dir/x.txt":  "x",
		"empty.txt":  "",
		"file.txt":   "f",
		"inside.txt": "in",
	})
	s.symlink(t, filepath.Join(s.outside, "secret.txt"), "escape-link")
	s.symlink(t, "../outside", "escape-dir")
	s.symlink(t, filepath.Join(s.outside, "missing.txt"), "dangling-out")
	s.symlink(t, "nowhere.txt", "dangling-in")
	require.NoError(t, syscall.Mkfifo(filepath.Join(s.root, "fifo"), 0o644))
	read := s.tool(t, NewRead)

	tests := []struct {
		name    string
		params  map[string]any
		kind    error
		message string
	}{
		{"missing file", map[string]any{"path": "notes/x.txt"}, ErrNotFound, "no such file or directory: notes/x.txt"},
		{"file used as a directory", map[string]any{"path": "file.txt/x"}, ErrNotFound, "no such file or directory: file.txt/x"},
		{"dangling symlink inside", map[string]any{"path": "dangling-in"}, ErrNotFound, "no such file or directory: dangling-in"},
		{"dot-dot escape", map[string]any{"path": "../outside/secret.txt"}, ErrEscapes, `path "../outside/secret.txt" escapes the tool root`},
		{"dot-dot escape to missing file", map[string]any{"path": "../x"}, ErrEscapes, `path "../x" escapes the tool root`},
		{"absolute path outside", map[string]any{"path": filepath.Join(s.outside, "secret.txt")}, ErrEscapes, "escapes the tool root"},
		{"absolute system path", map[string]any{"path": "/etc/passwd"}, ErrEscapes, `path "/etc/passwd" escapes the tool root`},
		{"symlink to a file outside", map[string]any{"path": "escape-link"}, ErrEscapes, `path "escape-link" escapes the tool root`},
		{"symlinked directory outside", map[string]any{"path": "escape-dir/secret.txt"}, ErrEscapes, "escapes the tool root"},
		{"dangling symlink pointing outside", map[string]any{"path": "dangling-out"}, ErrEscapes, "escapes the tool root"},
		{"binary file", map[string]any{"path": "bin.dat"}, ErrBinary, "bin.dat is a binary file"},
		{"invalid UTF-8 noise", map[string]any{"path": "noise.dat"}, ErrBinary, "noise.dat is a binary file"},
		{"directory", map[string]any{"path": "dir"}, ErrBadParam, "dir is a directory; use ls to list it"},
		{"fifo does not block", map[string]any{"path": "fifo"}, ErrNotRegular, "fifo is a named pipe (FIFO), not a regular file"},
		{"offset past the end", map[string]any{"path": "notes.txt", "offset": 5.0}, ErrBadParam, "offset 5 is beyond the end of notes.txt (2 lines)"},
		{"offset in an empty file", map[string]any{"path": "empty.txt", "offset": 2.0}, ErrBadParam, "beyond the end"},
		{"missing path", map[string]any{}, ErrBadParam, `parameter "path" of read is required`},
		{"empty path", map[string]any{"path": ""}, ErrBadParam, `parameter "path" of read is required`},
		{"path not a string", map[string]any{"path": 3.0}, ErrBadParam, `parameter "path" of read must be a string, got number 3`},
		{"offset as string", map[string]any{"path": "notes.txt", "offset": "2"}, ErrBadParam, `parameter "offset" of read must be an integer, got string "2"`},
		{"offset fractional", map[string]any{"path": "notes.txt", "offset": 1.5}, ErrBadParam, `"offset" of read must be an integer`},
		{"offset zero", map[string]any{"path": "notes.txt", "offset": 0.0}, ErrBadParam, `"offset" of read must be at least 1, got 0`},
		{"limit negative", map[string]any{"path": "notes.txt", "limit": -1.0}, ErrBadParam, `"limit" of read must be at least 1`},
		{"limit as bool", map[string]any{"path": "notes.txt", "limit": true}, ErrBadParam, `"limit" of read must be an integer, got boolean true`},
		{"unknown parameter", map[string]any{"path": "notes.txt", "foo": 1.0}, ErrBadParam, `unknown parameter "foo" for read`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, read, tc.params)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.message)
			assert.NotContains(t, err.Error(), s.root, "errors must not show the host path of the root")
		})
	}
}

func TestReadCapsHugeOutputWithNote(t *testing.T) {
	line := strings.Repeat("y", 1999) + "\n"
	s := newSandbox(t, map[string]string{"big.txt": strings.Repeat(line, 1500)})
	got, err := call(t, s.tool(t, NewRead), map[string]any{"path": "big.txt"})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(got), maxOutputBytes+200)
	shown := strings.Count(got, "\ty")
	assert.Less(t, shown, 1500)
	assert.Contains(t, got, fmt.Sprintf("[output capped at %d bytes]", maxOutputBytes))
	assert.Contains(t, got, fmt.Sprintf("[... %d more lines; use offset=%d to continue]", 1500-shown, shown+1))
}

func TestReadHonoursCancelledContext(t *testing.T) {
	s := newSandbox(t, map[string]string{"many.txt": strings.Repeat("x\n", 10000)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := callCtx(ctx, t, s.tool(t, NewRead), map[string]any{"path": "many.txt"})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestNewFileToolsRequireAnExistingDirectoryRoot(t *testing.T) {
	s := newSandbox(t, map[string]string{"f.txt": "x"})
	for name, ctor := range map[string]func(Options) (Tool, error){"read": NewRead, "grep": NewGrep, "find": NewFind, "ls": NewLs} {
		for _, root := range []string{"", filepath.Join(s.root, "missing"), filepath.Join(s.root, "f.txt")} {
			_, err := ctor(Options{Root: root})
			assert.Error(t, err, "%s with root %q", name, root)
		}
	}
}

func TestBuiltinReturnsAllowlistedTools(t *testing.T) {
	s := newSandbox(t, nil)
	all, err := Builtin(Options{Root: s.root})
	require.NoError(t, err)
	require.Len(t, all, len(Allowlist))
	for _, name := range Allowlist {
		require.Contains(t, all, name)
		assert.Equal(t, name, all[name].Name())
	}
}

func BenchmarkReadSmallFile(b *testing.B) {
	var content strings.Builder
	for i := range 100 {
		fmt.Fprintf(&content, "line %d of a small source file, with some text\n", i)
	}
	s := newSandbox(b, map[string]string{"small.txt": content.String()})
	read := s.tool(b, NewRead)
	params := map[string]any{"path": "small.txt"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := read.Execute(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}

// A ".." after a link means what it means to every path the tools take:
// the path is cleaned first, so "lnk/../top.txt" is top.txt at the root,
// whatever lnk points to.
func TestReadCleansDotDotBeforeFollowingALink(t *testing.T) {
	s := newSandbox(t, map[string]string{"top.txt": "top\n", "sub/deeper/x": "", "sub/top.txt": "sub\n"})
	s.symlink(t, "sub/deeper", "lnk")
	got, err := call(t, s.tool(t, NewRead), map[string]any{"path": "lnk/../top.txt"})
	require.NoError(t, err)
	assert.Equal(t, numbered(1, "top"), got)
}

// The root, or a directory above it, swapped for a link after the tools
// were made leads nowhere: what the link points to is outside the root
// the tools were given, and is refused, never read.
func TestReadRefusesARootSwappedForALink(t *testing.T) {
	for _, swap := range []string{"the root", "its parent"} {
		t.Run(swap, func(t *testing.T) {
			s := newSandbox(t, map[string]string{"a.txt": "mine\n"})
			require.NoError(t, os.WriteFile(filepath.Join(s.outside, "a.txt"), []byte("theirs\n"), 0o644))
			read := s.tool(t, NewRead)
			got, err := call(t, read, map[string]any{"path": "a.txt"})
			require.NoError(t, err)
			require.Equal(t, numbered(1, "mine"), got)

			moved := s.root
			target := s.outside
			if swap == "its parent" {
				moved = filepath.Dir(s.root)
				other := filepath.Join(filepath.Dir(moved), "other")
				require.NoError(t, os.MkdirAll(filepath.Join(other, "root"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(other, "root", "a.txt"), []byte("theirs\n"), 0o644))
				target = other
			}
			require.NoError(t, os.Rename(moved, moved+".away"))
			t.Cleanup(func() {
				_ = os.Remove(moved)
				_ = os.Rename(moved+".away", moved)
			})
			require.NoError(t, os.Symlink(target, moved))

			got, err = call(t, read, map[string]any{"path": "a.txt"})
			require.Error(t, err, got)
			assert.ErrorIs(t, err, ErrEscapes)
			assert.NotContains(t, got, "theirs")
		})
	}
}

// The quick open gives a regular file below the root and nothing else:
// every other case is left to the full path, which words the refusal.
func TestOpenBeneathOpensOnlyARegularFileBelowTheRoot(t *testing.T) {
	s := newSandbox(t, map[string]string{"real/file.txt": "hello\n"})
	s.symlink(t, "real/file.txt", "rel-link")
	s.symlink(t, filepath.Join(s.root, "real", "file.txt"), "abs-link")
	s.symlink(t, "../outside/secret.txt", "escape-link")
	require.NoError(t, syscall.Mkfifo(filepath.Join(s.root, "fifo"), 0o644))
	r, err := newRoot(s.root)
	require.NoError(t, err)
	for p, want := range map[string]bool{
		"real/file.txt": true, "rel-link": true, filepath.Join(s.root, "real/file.txt"): false,
		"abs-link": false, "escape-link": false, "fifo": false, "real": false, ".": false,
		"../outside/secret.txt": false, "missing": false,
	} {
		f, _, ok := r.openBeneath(p)
		assert.Equal(t, want, ok, p)
		if ok {
			require.NoError(t, f.Close())
		}
	}
}

// A path names a file in errors the same way whichever open served it:
// as written when relative, by its resolved root-relative path when
// absolute.
func TestReadNamesAFileAsResolveDoes(t *testing.T) {
	s := newSandbox(t, map[string]string{"real/bin.dat": "text\x00more"})
	s.symlink(t, "real", "lnk")
	read := s.tool(t, NewRead)
	for p, shown := range map[string]string{
		"lnk/bin.dat":                        "lnk/bin.dat",
		filepath.Join(s.root, "lnk/bin.dat"): "real/bin.dat",
	} {
		_, err := call(t, read, map[string]any{"path": p})
		require.ErrorIs(t, err, ErrBinary, p)
		assert.Contains(t, err.Error(), shown+" is a binary file", p)
	}
}
