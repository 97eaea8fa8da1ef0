package pump

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/internal/bell"
)

// nameOf is what the shim rings the request bell with for the request
// published under file: the part between "req-" and ".json".
func nameOf(file string) string {
	return strings.TrimSuffix(strings.TrimPrefix(file, reqPrefix), jsonSuffix)
}

// ringRaw writes raw bytes on the request bell, as a script can.
func ringRaw(t *testing.T, b *bell.Pair, raw string) {
	t.Helper()
	_, err := b.ChildFiles()[0].Write([]byte(raw))
	require.NoError(t, err)
}

// ringFor rings the request bell with the names of ids' requests.
func (h *harness) ringFor(b *bell.Pair, ids ...int64) {
	h.t.Helper()
	var raw strings.Builder
	for _, id := range ids {
		raw.WriteString(nameOf(h.reqName(id)) + "\n")
	}
	ringRaw(h.t, b, raw.String())
}

// namedServer is a session server whose only way to sweep is its bell.
func namedServer(t *testing.T, tool *funcTool) (*harness, *bell.Pair, *Server) {
	h := newHarness(t, tool)
	b := h.withBells()
	h.cfg.PollInterval = time.Hour
	return h, b, h.start()
}

const someMAC = "0123456789abcdef0123456789abcdef"

func TestANamedRingServesItsRequestWithoutListing(t *testing.T) {
	read := echoTool("read")
	h, b, srv := namedServer(t, read)
	h.request(1, "read", map[string]any{"text": "planted without a ring"})
	h.request(2, "read", map[string]any{"text": "rung for"})
	h.ringFor(b, 2)
	waitFor(t, "the named request's answer", h.answered(2))
	assert.Equal(t, "rung for", h.mustResponse(2).Content)
	_, answered := h.response(1)
	assert.False(t, answered, "a request nobody named waits for a listing")
	assert.True(t, h.exists(h.reqName(1)))

	ringHost(t, b) // a plain ring: list the directory
	waitFor(t, "the listed request's answer", h.answered(1))
	st := finalStats(t, srv)
	assert.Equal(t, 2, st.Calls)
	assert.Zero(t, st.Errors+st.Denied)
	assert.EqualValues(t, 2, read.runs.Load())
}

func TestANameSplitAcrossWritesIsServed(t *testing.T) {
	h, b, srv := namedServer(t, echoTool("read"))
	h.request(1, "read", map[string]any{"text": "hi"})
	name := nameOf(h.reqName(1))
	ringRaw(t, b, name[:5])
	ringRaw(t, b, name[5:])
	ringRaw(t, b, "\n")
	waitFor(t, "the answer", h.answered(1))
	assert.Equal(t, 1, finalStats(t, srv).Calls)
}

// Whatever a script writes on its request bell costs the host at most a
// listing: no crash, no hang, no call charged or refused, and the next
// real request is still served: by its name, or, after a record the
// script left unfinished (which swallows the name that follows it), by
// the fallback listing.
func TestHostileBellBytesAreHarmless(t *testing.T) {
	for _, tc := range []struct {
		name, raw    string
		swallowsNext bool
	}{
		{"garbage", "\xff\xfe garbage \x00\x01", false},
		{"a number past int64", "99999999999999999999999-" + someMAC + "\n", false},
		{"a name without a MAC", "7\n", false},
		{"a MAC of the wrong length", "7-0123\n", false},
		{"a file that does not exist", "5-" + someMAC + "\n", false},
		{"a negative id", "-1-" + someMAC + "\n", false},
		{"a path", "../../../etc/passwd\n", false},
		{"an endless name", strings.Repeat("1", 10000), true},
		{"empty records", "\n\n\n", false},
		{"the same name a thousand times", strings.Repeat("3-"+someMAC+"\n", 1000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			b := h.withBells()
			h.cfg.PollInterval = time.Hour
			if tc.swallowsNext {
				h.cfg.PollInterval = 20 * time.Millisecond
			}
			srv := h.start()
			ringRaw(t, b, tc.raw)
			h.request(1, "read", map[string]any{"text": "still served"})
			h.ringFor(b, 1)
			waitFor(t, "the real request's answer", h.answered(1))
			assert.Equal(t, "still served", h.mustResponse(1).Content)
			st := finalStats(t, srv)
			assert.Equal(t, 1, st.Calls)
			assert.Zero(t, st.Errors+st.Denied)
			assert.EqualValues(t, 1, read.runs.Load())
		})
	}
}

func TestNamingAnAnsweredRequestAgainDispatchesNothing(t *testing.T) {
	read := echoTool("read")
	h, b, srv := namedServer(t, read)
	h.request(1, "read", map[string]any{"text": "once"})
	body, err := os.ReadFile(h.path(h.reqName(1)))
	require.NoError(t, err)
	h.ringFor(b, 1)
	waitFor(t, "the answer", h.answered(1))
	for range 3 {
		h.ringFor(b, 1)
	}
	// The same request copied back under its name, and named.
	h.requestBody(1, body)
	h.ringFor(b, 1)
	waitFor(t, "the copy to be taken", func() bool { return !h.exists(h.reqName(1)) })
	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.EqualValues(t, 1, read.runs.Load(), "never dispatched twice")
	assert.Equal(t, "once", h.mustResponse(1).Content, "the real answer stays")
}

func TestAFloodOfNamesStillServesTheRealRequestsInIt(t *testing.T) {
	read := echoTool("read")
	h, b, srv := namedServer(t, read)
	for id := int64(1); id <= 3; id++ {
		h.request(id, "read", nil)
	}
	var flood strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&flood, "%d-%s\n", 1000+i, someMAC)
		if i%2000 == 0 {
			flood.WriteString(nameOf(h.reqName(int64(1+i/2000))) + "\n")
		}
	}
	ringRaw(t, b, flood.String())
	for id := int64(1); id <= 3; id++ {
		waitFor(t, "a real request's answer", h.answered(id))
	}
	st := finalStats(t, srv)
	assert.Equal(t, 3, st.Calls)
	assert.Zero(t, st.Errors+st.Denied)
	assert.EqualValues(t, 3, read.runs.Load())
}

func TestANameOfAnotherBridgesRequestIsNotServedThere(t *testing.T) {
	mine, myBell, mySrv := namedServer(t, echoTool("read"))
	theirs, theirBell, theirSrv := namedServer(t, echoTool("read"))
	theirs.request(1, "read", map[string]any{"text": "theirs"})
	// Named on this bridge's bell: it looks in its own directory only.
	ringRaw(t, myBell, nameOf(theirs.reqName(1))+"\n")
	mine.request(1, "read", map[string]any{"text": "mine"})
	mine.ringFor(myBell, 1)
	waitFor(t, "this bridge's answer", mine.answered(1))
	assert.Equal(t, "mine", mine.mustResponse(1).Content)
	_, answered := theirs.response(1)
	assert.False(t, answered)
	assert.True(t, theirs.exists(theirs.reqName(1)), "left where it is")

	theirs.ringFor(theirBell, 1)
	waitFor(t, "the other bridge's answer", theirs.answered(1))
	assert.Equal(t, "theirs", theirs.mustResponse(1).Content)
	assert.Equal(t, 1, finalStats(t, mySrv).Calls)
	assert.Equal(t, 1, finalStats(t, theirSrv).Calls)
}

// A kernel's cells share its bell: a name reaches every cell's server,
// and only the one whose directory holds the request serves it.
func TestANameOnAKernelsBellIsServedByTheCellWhoseRequestItIs(t *testing.T) {
	first := newHarness(t, echoTool("read"))
	b := first.withBells()
	first.cfg.PollInterval = time.Hour
	second := newHarness(t, echoTool("read"))
	second.cfg.Bells = b
	second.cfg.PollInterval = time.Hour
	firstSrv, secondSrv := first.start(), second.start()

	first.request(1, "read", map[string]any{"text": "one"})
	second.request(1, "read", map[string]any{"text": "two"})
	second.ringFor(b, 1)
	waitFor(t, "the second cell's answer", second.answered(1))
	assert.Equal(t, "two", second.mustResponse(1).Content)
	_, answered := first.response(1)
	assert.False(t, answered, "the first cell's request of the same id was not named")

	first.ringFor(b, 1)
	waitFor(t, "the first cell's answer", first.answered(1))
	assert.Equal(t, "one", first.mustResponse(1).Content)
	for _, st := range []Stats{finalStats(t, firstSrv), finalStats(t, secondSrv)} {
		assert.Equal(t, 1, st.Calls)
		assert.Zero(t, st.Errors+st.Denied)
	}
}

func TestANamedSymlinkIsNotFollowedAndIsLeftToTheListing(t *testing.T) {
	read := echoTool("read")
	h, b, srv := namedServer(t, read)
	body := []byte(`{"id": 1, "tool": "read", "params": {"text": "outside"}}`)
	target := filepath.Join(t.TempDir(), "target.json")
	require.NoError(t, os.WriteFile(target, body, 0o600))
	name := RequestName(h.token, 1, body)
	require.NoError(t, os.Symlink(target, h.path(name)))

	ringRaw(t, b, nameOf(name)+"\n")
	h.request(2, "read", nil)
	h.ringFor(b, 2)
	waitFor(t, "the next request's answer", h.answered(2))
	_, answered := h.response(1)
	assert.False(t, answered, "a named symlink is not opened")
	assert.True(t, h.exists(name))

	// The listing does to it what it always did: the marker it would
	// become is no evidence, so the call is refused.
	ringHost(t, b)
	waitFor(t, "the listing's answer", h.answered(1))
	assert.False(t, h.mustResponse(1).OK)
	assert.EqualValues(t, 1, read.runs.Load(), "only request 2 ran")
	assert.Equal(t, 2, finalStats(t, srv).Calls)
}

func TestANamedFIFOIsNeitherOpenedForLongNorServed(t *testing.T) {
	h, b, srv := namedServer(t, echoTool("read"))
	name := RequestName(h.token, 1, []byte("{}"))
	require.NoError(t, syscall.Mkfifo(h.path(name), 0o600))
	ringRaw(t, b, nameOf(name)+"\n")
	h.request(2, "read", nil)
	h.ringFor(b, 2)
	waitFor(t, "the next request's answer", h.answered(2))
	assert.True(t, h.exists(name))
	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.Zero(t, st.Errors+st.Denied)
}

func TestANamedForgeryIsRefusedAsAListingRefusesIt(t *testing.T) {
	read := echoTool("read")
	h, b, srv := namedServer(t, read)
	failures := 0
	srv.Stop(t.Context())
	h.cfg.OnAuthFailure = func() { failures++ }
	srv = h.start()
	h.requestWithToken(1, "not the bridge token", "read", nil)
	h.ringFor(b, 1)
	waitFor(t, "the refusal", h.answered(1))
	assert.False(t, h.mustResponse(1).OK)
	st := finalStats(t, srv)
	// Removed by the sweep that refused it, just after its answer: by the
	// time the server has stopped, it is gone.
	assert.False(t, h.exists(h.reqName(1)))
	assert.Equal(t, 1, st.Denied)
	assert.Zero(t, st.Calls)
	assert.Equal(t, 1, failures)
	assert.Zero(t, read.runs.Load())
}

func TestNamedRequestsPastTheCallLimitAreRefused(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	b := h.withBells()
	h.cfg.PollInterval = time.Hour
	h.cfg.MaxCalls = 1
	srv := h.start()
	h.request(1, "read", nil)
	h.request(2, "read", nil)
	h.ringFor(b, 2, 1)
	waitFor(t, "both answers", func() bool { return h.answered(1)() && h.answered(2)() })
	assert.True(t, h.mustResponse(1).OK, "claimed in ascending id, as a listing does")
	assert.Equal(t, msgCallLimit(1), h.mustResponse(2).Error)
	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.Equal(t, 1, st.Errors)
	assert.EqualValues(t, 1, read.runs.Load())
}

// A stream of named calls never starves the fallback listing: a request
// planted without a ring is found while the named ones keep coming.
func TestAFileWithoutARingIsListedWhileNamedCallsStream(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	b := h.withBells()
	h.cfg.PollInterval = 20 * time.Millisecond
	h.cfg.MaxCalls = 100000
	srv := h.start()
	h.request(1, "read", map[string]any{"text": "planted"})
	deadline := time.Now().Add(10 * time.Second)
	id := int64(2)
	for ; !h.answered(1)(); id++ {
		require.True(t, time.Now().Before(deadline), "the planted request was never listed")
		h.request(id, "read", nil)
		h.ringFor(b, id)
		waitFor(t, "a named answer", h.answered(id))
	}
	assert.Equal(t, "planted", h.mustResponse(1).Content)
	assert.EqualValues(t, id-1, finalStats(t, srv).Calls)
}

// The pump rings the response bell with the id it answered, so the shim
// wakes only that call's thread.
func TestTheResponseBellNamesTheAnsweredID(t *testing.T) {
	h, b, _ := namedServer(t, echoTool("read"))
	h.request(7, "read", nil)
	h.ringFor(b, 7)
	waitFor(t, "the answer", h.answered(7))
	buf := make([]byte, 64)
	n, err := b.ChildFiles()[1].Read(buf)
	require.NoError(t, err)
	assert.Equal(t, []byte("7\n"), bytes.TrimLeft(buf[:n], "\x00"))
}

// A named call's sweep lists nothing, so a marker planted beside it is
// settled by the drain that precedes the stats: counted as an error, and
// the forged answer next to it buys nothing.
func TestAMarkerPlantedBesideNamedCallsIsCountedByTheDrain(t *testing.T) {
	read := echoTool("read")
	h, b, srv := namedServer(t, read)
	h.publish(markerName(90), []byte(`{"id": 90, "tool": "bash", "params": {}}`))
	h.hostResponse(90, true, strings.Repeat("x", 1000))
	h.request(1, "read", map[string]any{"text": "real"})
	h.ringFor(b, 1)
	waitFor(t, "the answer", h.answered(1))
	st := finalStats(t, srv)
	assert.Equal(t, 1, st.Calls)
	assert.EqualValues(t, len("real"), st.Bytes)
	assert.Equal(t, 1, st.Errors, "the planted marker")
	assert.False(t, h.exists(markerName(90)))
}
