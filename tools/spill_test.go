package tools

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// read resolves <spill>/NAME only through the opener on its context: with
// none, no spill is readable, and the tool root is never consulted.
func TestReadOfASpillNeedsTheRunsOpener(t *testing.T) {
	s := newSandbox(t, map[string]string{"<spill>/spill-abc": "planted in the root\n"})
	read := s.tool(t, NewRead)
	_, err := call(t, read, map[string]any{"path": "<spill>/spill-abc"})
	require.ErrorIs(t, err, ErrNotFound)
	assert.EqualError(t, err, "<spill>/spill-abc: no spill files are readable here")

	spill := filepath.Join(s.outside, "spill-abc")
	require.NoError(t, os.WriteFile(spill, []byte("one\ntwo\nthree\n"), 0o600))
	var asked []string
	ctx := WithSpills(context.Background(), func(name string) (*os.File, error) {
		asked = append(asked, name)
		if name != "spill-abc" {
			return nil, errors.Join(errors.New("not yours"), fs.ErrNotExist)
		}
		return os.Open(spill)
	})
	got, err := callCtx(ctx, t, read, map[string]any{"path": "<spill>/spill-abc", "offset": 2, "limit": 1})
	require.NoError(t, err)
	assert.Equal(t, "     2\ttwo\n[... 1 more lines; use offset=3 to continue]", got)

	_, err = callCtx(ctx, t, read, map[string]any{"path": "<spill>/spill-other"})
	require.ErrorIs(t, err, ErrNotFound)
	assert.Equal(t, "<spill>/spill-other: not yours\nfile does not exist", err.Error())
	assert.Equal(t, []string{"spill-abc", "spill-other"}, asked)
}

// An opener that hands back something other than a regular file (a FIFO
// opened non-blocking, a directory) is refused, not read.
func TestReadOfASpillRefusesWhatIsNotARegularFile(t *testing.T) {
	s := newSandbox(t, nil)
	fifo := filepath.Join(s.outside, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	ctx := WithSpills(context.Background(), func(string) (*os.File, error) {
		return os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	})
	_, err := callCtx(ctx, t, s.tool(t, NewRead), map[string]any{"path": "<spill>/spill-abc"})
	require.ErrorIs(t, err, ErrNotRegular)
	assert.EqualError(t, err, "<spill>/spill-abc is a named pipe (FIFO), not a regular file")
}

// FuzzSpillName: whatever follows the prefix, an accepted name is one
// path element spill-XXXX, never "..", a slash or NUL.
func FuzzSpillName(f *testing.F) {
	for _, p := range []string{"<spill>/spill-abc", "<spill>/../x", "<spill>/spill-a/../b", "<spill>//etc", "<spill>/spill-\x00", "<spill>"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		name, err := spillName(p)
		if err != nil {
			require.ErrorIs(t, err, ErrBadParam)
			return
		}
		assert.Equal(t, SpillPrefix+"/"+name, p)
		assert.True(t, strings.HasPrefix(name, "spill-") && len(name) > len("spill-"), name)
		assert.NotContains(t, name, "/")
		assert.NotContains(t, name, ".")
		assert.NotContains(t, name, "\x00")
	})
}
