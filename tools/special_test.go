package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// special is a file that is not a regular file, planted by name.
type special struct {
	name, kind string
	mode       uint32
	dev        int
}

// specials are what a script can plant: a FIFO and a socket always, the
// devices where mknod is allowed (as root).
var specials = []special{
	{"fifo", "a named pipe (FIFO)", syscall.S_IFIFO, 0},
	{"sock", "a socket", syscall.S_IFSOCK, 0},
	{"chardev", "a character device", syscall.S_IFCHR, int(unix.Mkdev(1, 3))}, // like /dev/null
	{"blockdev", "a block device", syscall.S_IFBLK, int(unix.Mkdev(7, 0))},    // like /dev/loop0
}

// plant creates the specials under dir (a slash path below the root) and
// returns those it could create.
func plant(t *testing.T, s sandbox, dir string) []special {
	t.Helper()
	var made []special
	for _, sp := range specials {
		p := filepath.Join(s.root, filepath.FromSlash(dir), sp.name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		err := syscall.Mknod(p, sp.mode|0o644, sp.dev)
		if errors.Is(err, syscall.EPERM) {
			continue // devices need CAP_MKNOD
		}
		require.NoError(t, err, sp.name)
		made = append(made, sp)
	}
	return made
}

// within fails the test instead of hanging when f blocks.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call blocked")
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestReadRefusesSpecialFilesNamingTheirType(t *testing.T) {
	s := newSandbox(t, nil)
	made := plant(t, s, ".")
	s.symlink(t, "fifo", "link-to-fifo")
	read := s.tool(t, NewRead)
	fds := openFDs(t)
	for _, sp := range append(made, special{name: "link-to-fifo", kind: "a named pipe (FIFO)"}) {
		t.Run(sp.name, func(t *testing.T) {
			within(t, func() {
				_, err := call(t, read, map[string]any{"path": sp.name})
				assert.ErrorIs(t, err, ErrNotRegular)
				assert.EqualError(t, err, sp.name+" is "+sp.kind+", not a regular file")
			})
		})
	}
	assert.Equal(t, fds, openFDs(t), "no descriptor outlives a call")
}

func TestGrepNamedSpecialFileIsAnErrorAndWalksSkipThem(t *testing.T) {
	s := newSandbox(t, map[string]string{"a.txt": "needle\n", "sub/b.txt": "needle\n"})
	made := append(plant(t, s, "."), plant(t, s, "sub")...)
	grep := s.tool(t, NewGrep)
	fds := openFDs(t)
	within(t, func() {
		got, err := call(t, grep, map[string]any{"pattern": "needle"})
		require.NoError(t, err)
		assert.Equal(t, lines("a.txt:1:needle", "sub/b.txt:1:needle"), got, "special files are skipped without a note")
		for _, sp := range made[:len(made)/2] {
			_, err = call(t, grep, map[string]any{"pattern": "needle", "path": sp.name})
			assert.ErrorIs(t, err, ErrNotRegular)
			assert.EqualError(t, err, sp.name+" is "+sp.kind+", not a regular file")
		}
	})
	assert.Equal(t, fds, openFDs(t))
}

// find lists special files by name, as find(1) does (it never opens an
// entry); type="f" leaves them out. A FIFO named as path is not a
// directory.
func TestFindListsSpecialFilesWithoutOpeningThem(t *testing.T) {
	s := newSandbox(t, map[string]string{"a.txt": ""})
	made := plant(t, s, ".")
	find := s.tool(t, NewFind)
	within(t, func() {
		got, err := call(t, find, map[string]any{"pattern": "*"})
		require.NoError(t, err)
		want := []string{"a.txt"}
		for _, sp := range made {
			want = append(want, sp.name)
		}
		assert.ElementsMatch(t, want, splitLines(got))
		got, err = call(t, find, map[string]any{"pattern": "*", "type": "f"})
		require.NoError(t, err)
		assert.Equal(t, "a.txt", got)
		_, err = call(t, find, map[string]any{"pattern": "*", "path": "fifo"})
		assert.ErrorIs(t, err, ErrBadParam)
		assert.EqualError(t, err, "fifo is not a directory; find searches below a directory")
	})
}

func TestLsShowsSpecialFilesByType(t *testing.T) {
	s := newSandbox(t, nil)
	made := plant(t, s, ".")
	within(t, func() {
		got, err := call(t, s.tool(t, NewLs), map[string]any{"long": true})
		require.NoError(t, err)
		letters := map[string]byte{"fifo": 'p', "sock": 's', "chardev": 'c', "blockdev": 'b'}
		rows := splitLines(got)
		require.Len(t, rows, len(made))
		for _, row := range rows {
			name := row[strings.LastIndexByte(row, ' ')+1:]
			assert.Equal(t, letters[name], row[0], row)
		}
	})
}

// A .gitignore that is a FIFO (or a socket, a device, a directory) is
// never opened: the walk goes on without it and says so.
func TestSpecialIgnoreFileIsSkippedWithANote(t *testing.T) {
	kinds := append([]special{{name: "directory", kind: "a directory"}}, specials...)
	for _, sp := range kinds {
		t.Run(sp.name, func(t *testing.T) {
			s := newSandbox(t, map[string]string{"a.txt": "needle\n", "sub/b.txt": "needle\n", "sub/c.txt": "needle\n", "sub/.gitignore": "c.txt\n"})
			p := filepath.Join(s.root, ignoreName)
			if sp.mode == 0 {
				require.NoError(t, os.Mkdir(p, 0o755))
			} else if err := syscall.Mknod(p, sp.mode|0o644, sp.dev); errors.Is(err, syscall.EPERM) {
				t.Skip("mknod of a device needs CAP_MKNOD")
			} else {
				require.NoError(t, err)
			}
			fds := openFDs(t)
			within(t, func() {
				got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle"})
				require.NoError(t, err)
				assert.Equal(t, lines("a.txt:1:needle", "sub/b.txt:1:needle",
					"[.gitignore skipped: "+sp.kind+", not a regular file]"), got)
				got, err = call(t, s.tool(t, NewFind), map[string]any{"pattern": "*.txt", "path": "sub"})
				require.NoError(t, err)
				assert.Equal(t, lines("sub/b.txt", "[.gitignore skipped: "+sp.kind+", not a regular file]"), got,
					"an ancestor's ignore file is skipped the same way")
			})
			assert.Equal(t, fds, openFDs(t))
		})
	}
}

// A directory swapped for a FIFO between its listing and its visit is
// opened with O_DIRECTORY, which fails at once instead of blocking.
func TestDirectorySwappedForAFIFOFailsAtOnce(t *testing.T) {
	s := newSandbox(t, nil)
	require.NoError(t, syscall.Mkfifo(filepath.Join(s.root, "d"), 0o644))
	rt, err := os.OpenRoot(s.root)
	require.NoError(t, err)
	defer rt.Close()
	w := &walker{rt: rt}
	within(t, func() {
		_, err := w.list(context.Background(), "d")
		assert.ErrorIs(t, err, syscall.ENOTDIR)
	})
	assert.Zero(t, w.held)
}
