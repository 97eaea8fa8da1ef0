package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a script can plant in the tool root within one run, and the bound
// each tool keeps against it.

// A directory too large for the listing budget is searched in part, with
// a note naming it; the budget it held is given back when the walk moves
// on, so a sibling directory is listed in full.
func TestHugeDirectoryIsListedInPartWithANote(t *testing.T) {
	s := newSandbox(t, map[string]string{"next/needle.txt": "needle\n"})
	big := filepath.Join(s.root, "big")
	require.NoError(t, os.Mkdir(big, 0o755))
	// The longest names fill the budget with the fewest entries.
	pad := strings.Repeat("x", 250)
	total := maxListingCost/listingCost(1, len(pad)+5) + 100
	for i := range total {
		f, err := os.Create(filepath.Join(big, fmt.Sprintf("%05d%s", i, pad)))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle"})
	require.NoError(t, err)
	rows := splitLines(got)
	require.Len(t, rows, 2, got)
	assert.Equal(t, "next/needle.txt:1:needle", rows[0])
	m := regexp.MustCompile(`^\[big/: only (\d+) entries were read \(a search holds at most 4 MiB of directory listings at once\)\]$`).FindStringSubmatch(rows[1])
	require.NotNil(t, m, rows[1])
	read, _ := strconv.Atoi(m[1])
	assert.Less(t, read, total)
	assert.Greater(t, read, total/2)
}

// A tree deeper than the walk enters is cut there, with a note.
func TestTreeDeeperThanTheWalkLimitIsCutWithANote(t *testing.T) {
	s := newSandbox(t, nil)
	deep := filepath.Join(s.root, strings.Repeat("d/", maxWalkDepth+10))
	require.NoError(t, os.MkdirAll(deep, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(deep, "bottom.txt"), []byte("needle\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(s.root, "top.txt"), []byte("needle\n"), 0o644))
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle"})
	require.NoError(t, err)
	assert.Equal(t, lines("top.txt:1:needle", fmt.Sprintf("[1 directory more than %d levels deep not entered]", maxWalkDepth)), got)
}

// sparseLine makes a file of size bytes that is one endless line: text up
// front (so it is not binary), then a hole the kernel reads as zeros.
func sparseLine(t *testing.T, s sandbox, name string, size int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(s.root, name))
	require.NoError(t, err)
	_, err = f.WriteString(strings.Repeat("a", sniffBytes+1))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
}

// A single line of 64 GiB (a sparse file, planted in a millisecond) is
// read at memory speed for seconds: the line reader checks the context as
// it goes, so read and grep end at the deadline.
func TestEndlessLineEndsAtTheDeadline(t *testing.T) {
	s := newSandbox(t, nil)
	sparseLine(t, s, "endless.txt", 64<<30)
	for _, tc := range []struct {
		tool   func(Options) (Tool, error)
		params map[string]any
	}{
		{NewRead, map[string]any{"path": "endless.txt"}},
		{NewGrep, map[string]any{"pattern": "needle", "path": "endless.txt"}},
		{NewGrep, map[string]any{"pattern": "needle"}},
	} {
		tool := s.tool(t, tc.tool)
		t.Run(tool.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := callCtx(ctx, t, tool, tc.params)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			t.Logf("returned %s after the call started", time.Since(start).Round(time.Millisecond))
		})
	}
}

// grep's context lines ahead of a match are held only as far as they
// could be shown: a huge context_lines shows the lines closest to the
// match, within the output cap, and keeps no more in memory.
func TestGrepHugeContextHoldsOnlyWhatCanBeShown(t *testing.T) {
	line := strings.Repeat("c", 1000) + "\n"
	s := newSandbox(t, map[string]string{"f.txt": strings.Repeat(line, 3000) + "needle\n"})
	got, err := call(t, s.tool(t, NewGrep), map[string]any{"pattern": "needle", "context_lines": 1e9})
	require.NoError(t, err)
	rows := splitLines(got)
	assert.Equal(t, "f.txt:3001:needle", rows[len(rows)-1], "the match is shown")
	assert.Less(t, len(got), maxOutputBytes)
	first, err := strconv.Atoi(strings.Split(rows[0], "-")[1])
	require.NoError(t, err)
	assert.Greater(t, first, 1000, "the oldest context lines were let go")
	assert.Len(t, rows, 3001-first+1, "the held lines are contiguous up to the match")
}
