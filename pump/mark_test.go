package pump

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sweepNamed is one sweep of the requests of ids, as a ring naming them
// starts it.
func (h *harness) sweepNamed(ids ...int64) {
	h.t.Helper()
	s := newSweeper(h.cfg, h.lone(), &h.stats)
	s.names = []string{}
	for _, id := range ids {
		s.names = append(s.names, nameOf(h.reqName(id)))
	}
	require.NoError(h.t, s.run(context.Background()))
}

// readForClaim opens and reads id's request as a named sweep does, and
// returns the sweeper, the request's entry, its body and descriptor.
func (h *harness) readForClaim(id int64) (*sweeper, entry, []byte, int) {
	h.t.Helper()
	s := newSweeper(h.cfg, h.lone(), &h.stats)
	name := h.reqName(id)
	f, _ := parseFrameName(name, reqPrefix)
	e := entry{name: name, n: f.n, valid: true, num: f.num, mac: f.mac}
	body, fd, err := readBoundedFD(h.path(name), false, maxRequestBytes)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = unix.Close(fd) })
	return s, e, body, fd
}

// withFlinkRefused runs the test as on a kernel that refuses to link a
// descriptor.
func withFlinkRefused(t *testing.T) {
	was := flinkRefused.Load()
	flinkRefused.Store(true)
	t.Cleanup(func() { flinkRefused.Store(was) })
}

// swapIns are what a script can put at its request's name between the
// pump's read and its claim; each returns the path of what must stay
// untouched ("" for nothing).
var swapIns = map[string]func(t *testing.T, at string) string{
	"a regular file": func(t *testing.T, at string) string {
		other := []byte(`{"id": 1, "tool": "read", "params": {"text": "swapped in"}}`)
		require.NoError(t, os.WriteFile(at, other, 0o600))
		return ""
	},
	"a symlink": func(t *testing.T, at string) string {
		target := filepath.Join(t.TempDir(), "target.json")
		require.NoError(t, os.WriteFile(target, []byte("the link's target"), 0o600))
		require.NoError(t, os.Symlink(target, at))
		return target
	},
	"a FIFO": func(t *testing.T, at string) string {
		require.NoError(t, unix.Mkfifo(at, 0o600))
		return ""
	},
}

// A request swapped after its read while another name keeps the file
// read: the marker is a link to the file the pump authenticated, never
// what was swapped in, and the call runs with the authenticated params.
func TestANamedClaimsMarkerIsTheFileItAuthenticatedNotWhatWasSwappedIn(t *testing.T) {
	for name, swapIn := range swapIns {
		t.Run(name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.request(1, "read", map[string]any{"text": "authenticated"})
			s, e, body, fd := h.readForClaim(1)
			at := h.path(e.name)
			require.NoError(t, os.Link(at, filepath.Join(t.TempDir(), "kept")))
			require.NoError(t, os.Remove(at))
			target := swapIn(t, at)

			c, ok := s.claim(e, body, nil, fd)
			require.True(t, ok)
			marker, err := os.Lstat(h.path(markerName(1)))
			require.NoError(t, err)
			assert.True(t, marker.Mode().IsRegular(), "the marker is a regular file")
			var st unix.Stat_t
			require.NoError(t, unix.Fstat(fd, &st))
			assert.Equal(t, st.Ino, marker.Sys().(*syscall.Stat_t).Ino, "the marker is the file read")
			assert.False(t, h.exists(e.name), "the request's name is gone")
			untouched(t, target)

			require.NoError(t, s.dispatch(context.Background(), []claim{c}))
			assert.Equal(t, "authenticated", h.mustResponse(1).Content)
			assert.Equal(t, []string{responseName(1)}, h.names())
			assert.Equal(t, 1, h.stats.Calls)
			assert.Zero(t, h.stats.Errors+h.stats.Denied)
		})
	}
}

// A request swapped after its read with nothing else keeping the file
// read cannot be linked (it has no name left): the claim renames what is
// there, as it always did, and a marker that is no regular file refuses
// the call.
func TestANamedRequestSwappedAfterItsReadIsClaimedAsARenameClaimsIt(t *testing.T) {
	for name, swapIn := range swapIns {
		t.Run(name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.request(1, "read", map[string]any{"text": "authenticated"})
			s, e, body, fd := h.readForClaim(1)
			at := h.path(e.name)
			require.NoError(t, os.Remove(at))
			target := swapIn(t, at)

			c, ok := s.claim(e, body, nil, fd)
			assert.False(t, flinkRefused.Load(), "an unlinked file is no refusing kernel")
			untouched(t, target)
			if name != "a regular file" {
				assert.False(t, ok)
				assert.Equal(t, response{ID: 1, Error: msgNotMarked}, h.mustResponse(1))
				assert.Equal(t, []string{responseName(1)}, h.names())
				assert.Zero(t, read.runs.Load())
				return
			}
			require.True(t, ok)
			require.NoError(t, s.dispatch(context.Background(), []claim{c}))
			assert.Equal(t, "authenticated", h.mustResponse(1).Content)
			assert.Equal(t, []string{responseName(1)}, h.names())
		})
	}
}

func untouched(t *testing.T, target string) {
	t.Helper()
	if target == "" {
		return
	}
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "the link's target", string(data), "a link's target is untouched")
}

func TestANamedRequestWithdrawnAfterItsReadIsNotMarked(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.request(1, "read", nil)
	s, e, body, fd := h.readForClaim(1)
	require.NoError(t, os.Remove(h.path(e.name)))

	_, ok := s.claim(e, body, nil, fd)
	assert.False(t, ok)
	assert.Equal(t, response{ID: 1, Error: msgNotMarked}, h.mustResponse(1))
	assert.False(t, h.exists(markerName(1)))
	assert.False(t, flinkRefused.Load(), "a withdrawn file is no refusing kernel")
	assert.Zero(t, read.runs.Load())
}

func TestADirectoryAtTheMarkerNameBlocksANamedDispatch(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	require.NoError(t, os.MkdirAll(h.path("req-1.claim/sub"), 0o700))
	h.request(1, "read", nil)
	h.sweepNamed(1)

	assert.Equal(t, response{ID: 1, Error: msgNotMarked}, h.mustResponse(1))
	assert.Zero(t, read.runs.Load())
	assert.Equal(t, 1, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
	assert.DirExists(t, h.path("req-1.claim/sub"))
	assert.False(t, h.exists(h.reqName(1)))
}

func TestANamedClaimReplacesAFilePlantedAtItsMarkerName(t *testing.T) {
	for name, refused := range map[string]bool{"linked": false, "renamed": true} {
		t.Run(name, func(t *testing.T) {
			if refused {
				withFlinkRefused(t)
			}
			read := echoTool("read")
			h := newHarness(t, read)
			require.NoError(t, os.WriteFile(h.path(markerName(1)), []byte("planted"), 0o600))
			h.request(1, "read", map[string]any{"text": "ran"})
			h.sweepNamed(1)

			assert.Equal(t, "ran", h.mustResponse(1).Content)
			assert.Equal(t, []string{responseName(1)}, h.names())
			assert.Equal(t, 1, h.stats.Calls)
			assert.Zero(t, h.stats.Errors)
		})
	}
}

func TestANamedClaimRenamesWhereTheKernelRefusesTheLink(t *testing.T) {
	withFlinkRefused(t)
	read := echoTool("read")
	h := newHarness(t, read)
	h.request(1, "read", map[string]any{"text": "one"})
	h.request(2, "read", map[string]any{"text": "two"})
	h.sweepNamed(1, 2)

	assert.Equal(t, "one", h.mustResponse(1).Content)
	assert.Equal(t, "two", h.mustResponse(2).Content)
	assert.Equal(t, []string{responseName(1), responseName(2)}, h.names())
	assert.Equal(t, 2, h.stats.Calls)
}

// A killed named sweep leaves its linked markers, and the successor
// settles them from the ledger as it settles renamed ones.
func TestALinkedMarkerIsRecoveredAfterAKilledNamedSweep(t *testing.T) {
	b := newBlocker("read")
	h := newHarness(t, b)
	h.keepLedger()
	h.request(1, "read", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := newSweeper(h.cfg, h.lone(), &h.stats)
	s.names = []string{nameOf(h.reqName(1))}
	go func() { done <- s.run(ctx) }()
	b.waitStart(t)
	assert.True(t, h.exists(markerName(1)))
	assert.False(t, h.exists(h.reqName(1)))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	h.stats = newStats()
	h.sweep()
	assert.Equal(t, msgInterrupted, h.mustResponse(1).Error)
	assert.False(t, h.exists(markerName(1)))
	assert.Equal(t, 1, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
}
