package pump

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepRefusesBadTokens(t *testing.T) {
	h := newHarness(t)
	oneByte := []byte(h.token)
	oneByte[10] ^= 1
	cases := map[string]any{
		"one byte differs": string(oneByte),
		"shorter":          h.token[:42],
		"longer":           h.token + "A",
		"null":             nil,
		"number":           42,
		"object":           map[string]any{"token": h.token},
		"array":            []any{h.token},
	}
	for name, token := range cases {
		t.Run(name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.requestWithToken(1, token, "read", nil)
			h.sweep()

			assert.Equal(t, response{ID: 1, Error: msgAuthFailed}, h.mustResponse(1))
			assert.False(t, h.exists(h.reqName(1)), "request deleted")
			assert.Equal(t, 1, h.stats.Denied)
			assert.Zero(t, h.stats.Calls)
			assert.Zero(t, h.stats.Errors)
			assert.Zero(t, h.stats.Bytes)
			assert.Zero(t, read.runs.Load(), "tool never runs")
			assert.NotContains(t, h.stats.Seen, int64(1), "an unauthenticated id is not remembered")
		})
	}
}

func TestSweepRefusesMissingToken(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.publish(unauthenticatedRequest(1), []byte(`{"id": 1, "tool": "read", "params": {}}`))
	h.sweep()
	assert.Equal(t, msgAuthFailed, h.mustResponse(1).Error)
	assert.Equal(t, 1, h.stats.Denied)
}

func TestSweepAuthenticatesBeforeBudgets(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	h.cfg.MaxCalls, h.cfg.MaxResultBytes = 1, 10
	h.stats.Calls, h.stats.Bytes = 1, 10
	h.requestWithToken(1, "stale-token-from-another-cell", "read", nil)
	h.requestWithToken(2, "stale-token-from-another-cell", "bash", nil)
	h.sweep()

	assert.Equal(t, msgAuthFailed, h.mustResponse(1).Error)
	assert.Equal(t, msgAuthFailed, h.mustResponse(2).Error, "never 'not available' before authentication")
	assert.Equal(t, 2, h.stats.Denied)
	assert.Equal(t, 1, h.stats.Calls)
	assert.Zero(t, h.stats.Errors)
}

func TestSweepWithEmptyTokenFailsClosed(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.cfg.Token = ""
	h.requestWithToken(1, "", "read", nil)
	h.requestWithToken(2, h.token, "read", nil)
	h.sweep()
	assert.Equal(t, msgAuthFailed, h.mustResponse(1).Error)
	assert.Equal(t, msgAuthFailed, h.mustResponse(2).Error)
	assert.Zero(t, read.runs.Load())
}

func TestSweepAnswersNonObjectBodiesAsAuthenticationFailures(t *testing.T) {
	for name, body := range map[string]string{
		"not json":     `{not json`,
		"empty file":   ``,
		"empty string": `""`,
		"array":        `[{"token": "x"}]`,
		"string":       `"str"`,
		"null":         `null`,
		"number":       `1e400`,
		"invalid utf8": "{\"token\": \"\xff\", \"tool\": \"read\"}",
		"trailing":     `{"tool": "read"} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, echoTool("read"))
			h.publish(unauthenticatedRequest(7), []byte(body))
			h.sweep()
			assert.Equal(t, response{ID: 7, Error: msgAuthFailed}, h.mustResponse(7))
			assert.Equal(t, 1, h.stats.Denied)
			assert.Zero(t, h.stats.Calls)
		})
	}
}

func TestSweepAnswersMalformedCallsAsInvalidAndChargesThem(t *testing.T) {
	for name, fields := range map[string]string{
		"tool is a number":    `"tool": 5, "params": {}`,
		"tool is null":        `"tool": null, "params": {}`,
		"tool missing":        `"params": {}`,
		"params is an array":  `"tool": "read", "params": ["a"]`,
		"params is a string":  `"tool": "read", "params": "path"`,
		"params is true":      `"tool": "read", "params": true`,
		"params is a number":  `"tool": "read", "params": 3`,
		"params overflow f64": `"tool": "read", "params": {"limit": 1e400}`,
	} {
		t.Run(name, func(t *testing.T) {
			read := echoTool("read")
			h := newHarness(t, read)
			h.requestBody(3, []byte(`{"id": 3, `+fields+`}`))
			h.sweep()
			assert.Equal(t, response{ID: 3, Error: msgInvalid}, h.mustResponse(3))
			assert.Equal(t, 1, h.stats.Calls, "an invalid call consumes one call")
			assert.Equal(t, 1, h.stats.Errors)
			assert.Zero(t, read.runs.Load())
			assert.False(t, h.exists(h.reqName(3)))
		})
	}
}

func TestSweepTreatsAbsentNullOrFalseParamsAsEmpty(t *testing.T) {
	for name, params := range map[string]string{
		"absent": ``,
		"null":   `, "params": null`,
		"false":  `, "params": false`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, echoTool("read"))
			h.requestBody(1, []byte(`{"tool": "read"`+params+`}`))
			h.sweep()
			assert.Equal(t, response{ID: 1, OK: true, Content: "ok"}, h.mustResponse(1))
		})
	}
}

func TestSweepTakesTheIDFromTheFileNameNotTheBody(t *testing.T) {
	h := newHarness(t, echoTool("read"))
	body, err := json.Marshal(map[string]any{"id": 99, "tool": "read", "params": map[string]any{"text": "mine"}})
	require.NoError(t, err)
	h.requestBody(5, body)
	h.sweep()
	assert.Equal(t, response{ID: 5, OK: true, Content: "mine"}, h.mustResponse(5))
	assert.False(t, h.exists(responseName(99)))
}

func TestNewTokenIs43URLSafeCharactersAndFresh(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		tok, err := NewToken()
		require.NoError(t, err)
		assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, tok)
		assert.False(t, seen[tok])
		seen[tok] = true
	}
}

// A request without the bridge's MAC (another session's script, which can
// list the shared staging root, planted it) never replaces an answer that
// sits at its response name, and its id is not remembered: the script's
// own call of that id still runs.
func TestAnUnauthenticatedRequestNeverReplacesAnAnswerNorBurnsItsID(t *testing.T) {
	read := echoTool("read")
	h := newHarness(t, read)
	h.request(1, "read", map[string]any{"text": "first"})
	h.sweep()
	h.requestWithToken(1, "stolen? no: guessed", "read", nil)
	h.requestWithToken(2, "guessed", "read", nil)
	h.sweep()
	assert.Equal(t, "first", h.mustResponse(1).Content, "the real answer survives")
	assert.Equal(t, msgAuthFailed, h.mustResponse(2).Error)
	assert.Equal(t, 2, h.stats.Denied)
	assert.NotContains(t, h.stats.Seen, int64(2))

	h.request(2, "read", map[string]any{"text": "second"})
	h.sweep()
	assert.Equal(t, "second", h.mustResponse(2).Content, "the planted id did not become a replay")
	assert.EqualValues(t, 2, read.runs.Load())
}
