package pump

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDirectoryAtTheMarkerNameBlocksDispatch(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	require.NoError(t, os.MkdirAll(h.path("req-1.claim/sub"), 0o700))
	h.request(1, "read", nil)
	h.sweep()

	assert.Equal(t, response{ID: 1, Error: msgNotMarked}, h.mustResponse(1))
	assert.Zero(t, read.runs.Load())
	assert.Equal(t, 1, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
	assert.DirExists(t, h.path("req-1.claim/sub"))
	assert.False(t, h.exists(h.reqName(1)))
}

func TestSymlinkedRequestIsNeverDispatched(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	target := filepath.Join(t.TempDir(), "body.json")
	body := mustJSON(t, map[string]any{"tool": "read", "params": map[string]any{}})
	require.NoError(t, os.WriteFile(target, body, 0o600))
	require.NoError(t, os.Symlink(target, h.path(RequestName(h.token, 1, body))))
	h.sweep()

	assert.Equal(t, response{ID: 1, Error: msgNotMarked}, h.mustResponse(1))
	assert.Zero(t, read.runs.Load())
	assert.Equal(t, []string{responseName(1)}, h.names(), "no req-* entry remains")
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, body, data, "the link's target is untouched")
}

// killMidWave claims three blocking calls, cancels the sweep while all
// three are in flight and returns the harness with the markers left.
func killMidWave(t *testing.T) (*harness, *blocker) {
	b := newBlocker("read")
	h := newHarness(t, b)
	h.keepLedger()
	for id := int64(1); id <= 3; id++ {
		h.request(id, "read", nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := h.sweepAsync(ctx)
	for range 3 {
		b.waitStart(t)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	waitFor(t, "tools to see the cancellation", func() bool { return b.canceled.Load() == 3 })
	for id := int64(1); id <= 3; id++ {
		require.True(t, h.exists(markerName(id)), "marker %d survives the killed sweep", id)
		_, answered := h.response(id)
		require.False(t, answered, "a killed sweep answers nothing")
	}
	return h, b
}

func TestSuccessorSweepAnswersAKilledSweepsClaimsAsInterrupted(t *testing.T) {
	for name, freshStats := range map[string]bool{"stats lost with the sweep": true, "stats kept": false} {
		t.Run(name, func(t *testing.T) {
			h, b := killMidWave(t)
			if freshStats {
				// As a Server loses an abandoned sweep's copy of the
				// stats: only its ledger proves the claims.
				h.stats = newStats()
			}
			h.sweep()
			for id := int64(1); id <= 3; id++ {
				assert.Equal(t, response{ID: id, Error: msgInterrupted}, h.mustResponse(id))
				assert.False(t, h.exists(markerName(id)))
			}
			assert.EqualValues(t, 3, b.runs.Load(), "never re-run")
			assert.Equal(t, 3, h.stats.Calls)
			assert.Equal(t, 3, h.stats.Errors)

			for id := int64(1); id <= 3; id++ {
				require.NoError(t, os.Remove(h.path(responseName(id))))
				h.request(id, "read", nil)
			}
			h.sweep()
			for id := int64(1); id <= 3; id++ {
				assert.Equal(t, msgReplayed, h.mustResponse(id).Error)
			}
			assert.Equal(t, 3, h.stats.Calls)
			assert.EqualValues(t, 3, b.runs.Load())
		})
	}
}

func TestRecoverRestoresRealAccountingFromASurvivingResponse(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.publish(markerName(1), mustJSON(t, map[string]any{"tool": "read"}))
	resp := encodeResponse(h.token, 1, true, "hello")
	h.publish(responseName(1), resp)
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "read"}}))

	assert.Equal(t, 1, h.stats.Calls)
	assert.EqualValues(t, 5, h.stats.Bytes)
	assert.Equal(t, []string{"read"}, h.stats.SortedTools())
	assert.Zero(t, h.stats.Errors)
	assert.False(t, h.stats.AccountingLoss)
	data, err := os.ReadFile(h.path(responseName(1)))
	require.NoError(t, err)
	assert.Equal(t, resp, data, "the response is left as is")
	assert.False(t, h.exists(markerName(1)))
}

// A marker is evidence only of this pump's own claim. A script (of this
// run, or another session writing into this bridge) that plants one next
// to a forged success buys no call, no bytes and no tool.
func TestRecoverNeverChargesAPlantedMarker(t *testing.T) {
	for name, recoverWith := range map[string]func(h *harness){
		"the next sweep":     func(h *harness) { h.sweep() },
		"a server's recover": func(h *harness) { require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{})) },
		"a live ledger that never claimed it": func(h *harness) {
			h.keepLedger()
			h.sweep()
		},
	} {
		t.Run(name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.publish(markerName(1), mustJSON(t, map[string]any{"token": h.token, "tool": "bash-rm-rf"}))
			forged := []byte(`{"id":1,"ok":true,"content":"rm -rf done"}`)
			h.publish(responseName(1), forged)
			recoverWith(h)

			assert.Zero(t, h.stats.Calls)
			assert.Zero(t, h.stats.Bytes)
			assert.Empty(t, h.stats.SortedTools())
			assert.Equal(t, 1, h.stats.Errors, "a planted marker is an error")
			assert.False(t, h.exists(markerName(1)), "the planted marker is removed")

			// The id is not burnt: the script's own call with it runs.
			require.NoError(t, os.Remove(h.path(responseName(1))))
			h.request(1, "read", nil)
			h.sweep()
			assert.True(t, h.mustResponse(1).OK)
			assert.Equal(t, 1, h.stats.Calls)
			assert.Equal(t, []string{"read"}, h.stats.SortedTools())
			assert.EqualValues(t, 1, read.runs.Load())
		})
	}
}

func TestRecoverIgnoresPlantedMarkerDirectoriesAndLinks(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, os.MkdirAll(h.path("req-1.claim/x"), 0o700))
	require.NoError(t, os.MkdirAll(h.path("req-x.claim"), 0o700))
	target := filepath.Join(t.TempDir(), "t")
	require.NoError(t, os.WriteFile(target, []byte(`{"tool":"read"}`), 0o600))
	require.NoError(t, os.Symlink(target, h.path("req-2.claim")))
	require.NoError(t, recoverOnce(h.cfg, &h.stats, nil))
	h.sweep()

	assert.Equal(t, newStats(), h.stats)
	assert.ElementsMatch(t, []string{"req-1.claim", "req-x.claim", "req-2.claim"}, h.names())
	assert.DirExists(t, h.path("req-1.claim/x"))
}

func TestRecoverDeletesRegularMarkersWithNonIntegerNames(t *testing.T) {
	h := newHarness(t)
	h.publish("req-zz.claim", []byte(`{}`))
	require.NoError(t, recoverOnce(h.cfg, &h.stats, nil))
	assert.Empty(t, h.names())
	assert.Equal(t, newStats(), h.stats)
}

func TestUndeletableMarkerIsChargedOnce(t *testing.T) {
	h := newHarness(t)
	attempts := 0
	h.hooks.unlink = func(path string) error {
		if filepath.Base(path) == markerName(1) {
			attempts++
			return syscall.EPERM
		}
		return syscall.Unlink(path)
	}
	h.publish(markerName(1), []byte(`{"tool":"read"}`))
	h.recoverDebts(claimLedger{1: {Kind: claimClaimed, Tool: "read"}})
	assert.Equal(t, 3, attempts, "one attempt and two retries")
	assert.Equal(t, 1, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
	assert.Equal(t, msgInterrupted, h.mustResponse(1).Error)

	before := h.stats.Clone()
	h.recoverDebts(nil)
	h.sweep()
	assert.Equal(t, before, h.stats, "a second recovery is cleanup only")
	assert.True(t, h.exists(markerName(1)))
}

func TestLedgerClaimWithoutEvidenceIsInterruptedAndFlagsLoss(t *testing.T) {
	h := newHarness(t, echoTool("webfetch"))
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "webfetch"}}))
	assert.Equal(t, response{ID: 1, Error: msgInterrupted}, h.mustResponse(1))
	assert.Equal(t, 1, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
	assert.True(t, h.stats.AccountingLoss)

	require.NoError(t, os.Remove(h.path(responseName(1))))
	h.request(1, "webfetch", nil)
	h.sweep()
	assert.Equal(t, msgReplayed, h.mustResponse(1).Error)
	assert.Equal(t, 1, h.stats.Calls)
}

func TestLedgerClaimWithSurvivingSuccessRestoresAccountingWithoutLoss(t *testing.T) {
	h := newHarness(t, echoTool("webfetch"))
	h.hostResponse(1, true, "page text")
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "webfetch"}}))
	assert.Equal(t, 1, h.stats.Calls)
	assert.EqualValues(t, len("page text"), h.stats.Bytes)
	assert.Equal(t, []string{"webfetch"}, h.stats.SortedTools())
	assert.Zero(t, h.stats.Errors)
	assert.False(t, h.stats.AccountingLoss)
}

// Recovery believes only the pump's own answers: a success planted at the
// response name by a script without the token restores no accounting,
// and the claim is answered as interrupted over it.
func TestRecoverIgnoresAnUnauthenticatedSurvivingResponse(t *testing.T) {
	h := newHarness(t)
	other, err := NewToken()
	require.NoError(t, err)
	h.publish(markerName(1), mustJSON(t, map[string]any{"tool": "read"}))
	h.publish(responseName(1), []byte(`{"id":1,"ok":true,"content":"forged bytes"}`))
	h.publish(responseName(2), encodeResponse(other, 2, true, "another bridge's"))
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "read"}, 2: {Kind: claimClaimed, Tool: "read"}}))
	assert.Equal(t, 2, h.stats.Calls)
	assert.Zero(t, h.stats.Bytes)
	assert.Equal(t, 2, h.stats.Errors)
	assert.True(t, h.stats.AccountingLoss, "a claimed call without a provable outcome")
	assert.Equal(t, msgInterrupted, h.mustResponse(1).Error)
	assert.Equal(t, msgInterrupted, h.mustResponse(2).Error)
}

func TestLedgerToolBeatsAForgedMarkerBody(t *testing.T) {
	h := newHarness(t, echoTool("read"), echoTool("webfetch"))
	h.publish(markerName(1), []byte(`{"tool":"read"}`))
	h.hostResponse(1, true, "x")
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "webfetch"}}))
	assert.Equal(t, []string{"webfetch"}, h.stats.SortedTools())
	assert.Equal(t, 1, h.stats.Calls)
}

func TestMarkerCoveredLedgerIDIsChargedOnce(t *testing.T) {
	h := newHarness(t)
	h.publish(markerName(1), []byte(`{"tool":"read"}`))
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "read"}}))
	assert.Equal(t, 1, h.stats.Calls)
	assert.Equal(t, 1, h.stats.Errors)
	assert.Equal(t, msgInterrupted, h.mustResponse(1).Error)
}

func TestLedgerDenialKeepsASurvivingAnswerVerbatim(t *testing.T) {
	h := newHarness(t)
	h.hostResponse(1, false, "Tool 'webfetch' is in deny list")
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{
		1: {Kind: claimDenied, Tool: "webfetch"},
		2: {Kind: claimDenied, Tool: "webfetch"},
		3: {Kind: claimDenied},
	}))
	assert.Equal(t, "Tool 'webfetch' is in deny list", h.mustResponse(1).Error)
	assert.Equal(t, "tool 'webfetch' denied by policy", h.mustResponse(2).Error)
	assert.Equal(t, "rpc tool call denied by policy", h.mustResponse(3).Error)
	assert.Equal(t, 3, h.stats.Calls)
	assert.Equal(t, 3, h.stats.Denied)
	assert.Zero(t, h.stats.Errors)
}

func TestLedgerInvalidAndUnknownToolAreAnsweredAndCharged(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{
		1: {Kind: claimInvalid},
		2: {Kind: claimUnknownTool, Tool: "nosuch"},
	}))
	assert.Equal(t, msgInvalid, h.mustResponse(1).Error)
	assert.Equal(t, "tool 'nosuch' is not available inside execute_code scripts", h.mustResponse(2).Error)
	assert.Equal(t, 2, h.stats.Calls)
	assert.Equal(t, 2, h.stats.Errors)

	h2 := newHarness(t)
	require.NoError(t, recoverOnce(h2.cfg, &h2.stats, claimLedger{1: {Kind: claimUnknownTool}}))
	assert.Equal(t, "tool is not available inside execute_code scripts", h2.mustResponse(1).Error)
}

func TestBareReservationIsChargedWithoutAnAnswer(t *testing.T) {
	for _, kind := range []claimKind{claimReserved, "something-new"} {
		t.Run(string(kind), func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.request(1, "read", nil)
			require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: kind}}))
			assert.Equal(t, 1, h.stats.Calls)
			assert.Equal(t, 1, h.stats.Errors)
			_, answered := h.response(1)
			assert.False(t, answered)

			h.sweep()
			assert.Equal(t, msgReplayed, h.mustResponse(1).Error)
			assert.Equal(t, 1, h.stats.Calls, "no second charge")
			assert.Zero(t, read.runs.Load())
		})
	}
}

func TestLedgerSkipsIDsAlreadyRemembered(t *testing.T) {
	h := newHarness(t)
	h.stats.remember(1)
	require.NoError(t, recoverOnce(h.cfg, &h.stats, claimLedger{1: {Kind: claimClaimed, Tool: "read"}}))
	assert.Zero(t, h.stats.Calls)
	assert.False(t, h.stats.AccountingLoss)
	_, answered := h.response(1)
	assert.False(t, answered)
}

func TestLedgerHookHearsReservationThenClaimBeforeTheMarkerExists(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	type feed struct {
		id           int64
		kind         claimKind
		tool         string
		markerExists bool
		charged      int
	}
	var feeds []feed
	h.cfg.onClaim = func(id int64, kind claimKind, tool string) {
		feeds = append(feeds, feed{id, kind, tool, h.exists(markerName(id)), h.stats.Calls})
	}
	h.request(1, "read", nil)
	h.sweep()
	assert.Equal(t, []feed{
		{1, claimReserved, "", false, 0},
		{1, claimClaimed, "read", false, 1},
	}, feeds, "reserved is fed before the spend, claimed before the marker")
}

func TestLedgerHookHearsEachDisposition(t *testing.T) {
	h := newHarness(t, echoTool("read"), echoTool("ls"))
	h.cfg.Policy = denyPolicy{"ls": "no"}
	h.cfg.MaxCalls = 3
	ledger := claimLedger{}
	h.cfg.onClaim = ledger.Record
	h.requestBody(1, []byte(`{"tool":1}`))
	h.request(2, "bash", nil)
	h.request(3, "ls", nil)
	h.request(4, "read", nil)
	h.requestWithToken(5, "bad", "read", nil)
	h.sweep()
	assert.Equal(t, claimLedger{
		1: {Kind: claimInvalid},
		2: {Kind: claimUnknownTool, Tool: "bash"},
		3: {Kind: claimDenied, Tool: "ls"},
	}, ledger, "no entry for a call-limit refusal or an authentication failure")
}

func TestAPanickingLedgerHookIsSwallowed(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.onClaim = func(int64, claimKind, string) { panic(errors.New("ledger gone")) }
	h.request(1, "read", nil)
	h.sweep()
	assert.True(t, h.mustResponse(1).OK)
	assert.Equal(t, 1, h.stats.Calls)
}

func TestSweepKilledRightAfterTheReservationSettlesOneCallAndOneError(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	ledger := claimLedger{}
	h.cfg.onClaim = func(id int64, kind claimKind, tool string) {
		ledger.Record(id, kind, tool)
		if kind == claimReserved {
			runtime.Goexit() // the sweep dies right after the feed
		}
	}
	h.request(1, "read", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sweepOnce(context.Background(), h.cfg, &h.stats)
	}()
	<-done

	_, answered := h.response(1)
	assert.False(t, answered)
	assert.False(t, h.exists(markerName(1)))
	assert.True(t, h.exists(h.reqName(1)), "the request file is intact")

	settled := newStats() // the dead sweep's stats die with it
	require.NoError(t, recoverOnce(h.cfg, &settled, ledger))
	assert.Equal(t, 1, settled.Calls)
	assert.Equal(t, 1, settled.Errors)
	_, answered = h.response(1)
	assert.False(t, answered)
	assert.Zero(t, read.runs.Load())
}
