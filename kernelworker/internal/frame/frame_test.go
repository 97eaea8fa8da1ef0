package frame

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fr builds one frame line from its JSON body.
func fr(body string) string { return Prefix + body + "\n" }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A whole conversation: ready, one cell with every kind of frame, bye.
var conversation = fr(`{"v":1,"type":"ready","pid":4242}`) +
	fr(`{"v":1,"type":"started","id":"cell-1"}`) +
	fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"`+b64("hello\n")+`"}`) +
	fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stderr","data":"`+b64("é\x00")+`","extra":[1,2]}`) +
	fr(`{"v":1,"type":"exception","id":"cell-1","kind":"error","name":"ValueError","message":"boom","traceback":null}`) +
	fr(`{"v":1,"type":"exception","id":"cell-1","kind":"interrupted","name":"KeyboardInterrupt"}`) +
	fr(`{"v":1,"type":"done","id":"cell-1","dropped":12}`) +
	fr(`{"v":1,"type":"started","id":"cell-2"}`) +
	fr(`{"v":1,"type":"done","id":"cell-2"}`) +
	fr(`{"v":1,"type":"bye"}`)

var conversationFrames = []Frame{
	{Type: Ready, PID: 4242},
	{Type: Started, ID: "cell-1"},
	{Type: Stream, ID: "cell-1", Stream: "stdout", Data: []byte("hello\n")},
	{Type: Stream, ID: "cell-1", Stream: "stderr", Data: []byte("é\x00")},
	{Type: Exception, ID: "cell-1", Kind: "error", Name: "ValueError", Message: "boom"},
	{Type: Exception, ID: "cell-1", Kind: "interrupted", Name: "KeyboardInterrupt"},
	{Type: Done, ID: "cell-1", Dropped: 12},
	{Type: Started, ID: "cell-2"},
	{Type: Done, ID: "cell-2"},
	{Type: Bye},
}

func TestParserDeliversFramesInOrderFromOneChunk(t *testing.T) {
	var p Parser
	frames, err := p.Feed([]byte(conversation))
	require.NoError(t, err)
	assert.Equal(t, conversationFrames, frames)
}

func TestParserGivesTheSameFramesWhateverTheSplit(t *testing.T) {
	data := []byte(conversation)
	for cut := 0; cut <= len(data); cut++ {
		var p Parser
		a, err := p.Feed(data[:cut])
		require.NoError(t, err, "cut %d", cut)
		b, err := p.Feed(data[cut:])
		require.NoError(t, err, "cut %d", cut)
		require.Equal(t, conversationFrames, append(a, b...), "cut %d", cut)
	}
	var p Parser
	var all []Frame
	for i := range data {
		got, err := p.Feed(data[i : i+1])
		require.NoError(t, err, "byte %d", i)
		all = append(all, got...)
	}
	assert.Equal(t, conversationFrames, all, "byte by byte")
}

func TestParserAcceptsAnEmptyChunk(t *testing.T) {
	var p Parser
	frames, err := p.Feed(nil)
	require.NoError(t, err)
	assert.Empty(t, frames)
	frames, err = p.Feed([]byte(Prefix[:5]))
	require.NoError(t, err)
	assert.Empty(t, frames)
	frames, err = p.Feed([]byte{})
	require.NoError(t, err)
	assert.Empty(t, frames)
}

// padFrame returns a started frame line (newline excluded) of exactly n
// bytes, the padding in an ignored field.
func padFrame(t *testing.T, n int) string {
	t.Helper()
	head := Prefix + `{"v":1,"type":"started","id":"cell-1","pad":"`
	tail := `"}`
	require.Greater(t, n, len(head)+len(tail))
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestParserAcceptsAFrameOfExactlyTheCap(t *testing.T) {
	var p Parser
	frames, err := p.Feed([]byte(padFrame(t, MaxBytes) + "\n"))
	require.NoError(t, err)
	require.Len(t, frames, 1)
	assert.Equal(t, "cell-1", frames[0].ID)
}

func TestParserAcceptsAStreamChunkOfExactlyTheCap(t *testing.T) {
	var p Parser
	_, err := p.Feed([]byte(fr(`{"v":1,"type":"started","id":"c"}`)))
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{0xAB}, MaxStreamChunk)
	frames, err := p.Feed([]byte(fr(`{"v":1,"type":"stream","id":"c","stream":"stdout","data":"` +
		base64.StdEncoding.EncodeToString(chunk) + `"}`)))
	require.NoError(t, err)
	require.Len(t, frames, 1)
	assert.Equal(t, chunk, frames[0].Data)
}

func TestParserRejectsAnUnterminatedFrameOverTheCapBeforeItsNewline(t *testing.T) {
	var p Parser
	_, err := p.Feed([]byte(padFrame(t, MaxBytes)))
	require.NoError(t, err, "exactly the cap may still get its newline")
	_, err = p.Feed([]byte("x"))
	assertCheck(t, err, CheckFrameTooLarge)
}

func TestParserRejectsADivergingPartialPrefixBeforeItsNewline(t *testing.T) {
	var p Parser
	_, err := p.Feed([]byte("\x1elemon-py"))
	require.NoError(t, err)
	_, err = p.Feed([]byte("thoX"))
	assertCheck(t, err, CheckBadPrefix)
}

func TestParserFailsClosed(t *testing.T) {
	var p Parser
	// The good frame before the bad one in the same chunk is not delivered.
	frames, err := p.Feed([]byte(fr(`{"v":1,"type":"ready"}`) + "garbage\n"))
	assertCheck(t, err, CheckBadPrefix)
	assert.Empty(t, frames)
	// And the parser stays failed.
	frames, err = p.Feed([]byte(fr(`{"v":1,"type":"ready"}`)))
	assertCheck(t, err, CheckBadPrefix)
	assert.Empty(t, frames)
}

func assertCheck(t *testing.T, err error, check string) {
	t.Helper()
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrProtocol), "%v wraps ErrProtocol", err)
	var pe *ProtocolError
	require.True(t, errors.As(err, &pe), "%v is a ProtocolError", err)
	assert.Equal(t, check, pe.Check, "error: %v", err)
}

// Every check of the frame parser (docs/protocol.md, Frames), after a
// preamble that puts the parser in the state the row needs.
func TestParserRejectsEveryProtocolViolation(t *testing.T) {
	const (
		ready   = `{"v":1,"type":"ready"}`
		started = `{"v":1,"type":"started","id":"cell-1"}`
	)
	open := fr(ready) + fr(started)
	tests := []struct {
		name, input, check string
	}{
		{"buffer not a prefix", "hello", CheckBadPrefix},
		{"unprefixed bytes after a frame", fr(ready) + "hello", CheckBadPrefix},
		{"empty line", "\n", CheckBadPrefix},
		{"line without the prefix", fr(ready) + "\x1elemon-pythonX{}\n", CheckBadPrefix},
		{"prefix without tab", "\x1elemon-python{}\n", CheckBadPrefix},
		{"line over the cap", padFrame(t, MaxBytes+1) + "\n", CheckFrameTooLarge},
		{"remainder over the cap", padFrame(t, MaxBytes+1), CheckFrameTooLarge},
		{"invalid json", fr(`{"v":1,`), CheckInvalidJSON},
		{"trailing data", fr(`{"v":1,"type":"ready"} {}`), CheckInvalidJSON},
		{"array", fr(`[1]`), CheckInvalidJSON},
		{"string", fr(`"ready"`), CheckInvalidJSON},
		{"null", fr(`null`), CheckInvalidJSON},
		{"missing v", fr(`{"type":"ready"}`), CheckMissingField},
		{"v 1.0", fr(`{"v":1.0,"type":"ready"}`), CheckInvalidVersion},
		{"v 1e0", fr(`{"v":1e0,"type":"ready"}`), CheckInvalidVersion},
		{"v string", fr(`{"v":"1","type":"ready"}`), CheckInvalidVersion},
		{"v true", fr(`{"v":true,"type":"ready"}`), CheckInvalidVersion},
		{"v 2", fr(`{"v":2,"type":"ready"}`), CheckInvalidVersion},
		{"v null", fr(`{"v":null,"type":"ready"}`), CheckInvalidVersion},
		{"missing type", fr(`{"v":1}`), CheckMissingField},
		{"null type", fr(`{"v":1,"type":null}`), CheckMissingField},
		{"unknown type", fr(`{"v":1,"type":"wake"}`), CheckUnknownType},
		{"non-string type", fr(`{"v":1,"type":7}`), CheckUnknownType},
		{"frame after bye", fr(`{"v":1,"type":"bye"}`) + fr(ready), CheckUnexpectedFrame},
		{"frame after fatal", fr(`{"v":1,"type":"fatal","reason":"x"}`) + fr(ready), CheckUnexpectedFrame},
		{"second bye", fr(`{"v":1,"type":"bye"}`) + fr(`{"v":1,"type":"bye"}`), CheckUnexpectedFrame},
		{"second ready", fr(ready) + fr(ready), CheckUnexpectedFrame},
		{"started while open", open + fr(`{"v":1,"type":"started","id":"cell-2"}`), CheckCellAlreadyActive},
		{"second started same id", open + fr(started), CheckCellAlreadyActive},
		{"stream without cell", fr(`{"v":1,"type":"stream","id":"c","stream":"stdout","data":"eA=="}`), CheckNoActiveCell},
		{"exception without cell", fr(`{"v":1,"type":"exception","id":"c","kind":"error","name":"E"}`), CheckNoActiveCell},
		{"done without cell", fr(`{"v":1,"type":"done","id":"c"}`), CheckNoActiveCell},
		{"second done", open + fr(`{"v":1,"type":"done","id":"cell-1"}`) + fr(`{"v":1,"type":"done","id":"cell-1"}`), CheckNoActiveCell},
		{"stream wrong id", open + fr(`{"v":1,"type":"stream","id":"cell-9","stream":"stdout","data":"eA=="}`), CheckWrongID},
		{"exception wrong id", open + fr(`{"v":1,"type":"exception","id":"cell-9","kind":"error","name":"E"}`), CheckWrongID},
		{"done wrong id", open + fr(`{"v":1,"type":"done","id":"cell-9"}`), CheckWrongID},
		{"started missing id", fr(`{"v":1,"type":"started"}`), CheckMissingField},
		{"started null id", fr(`{"v":1,"type":"started","id":null}`), CheckMissingField},
		{"started empty id", fr(`{"v":1,"type":"started","id":""}`), CheckInvalidField},
		{"started numeric id", fr(`{"v":1,"type":"started","id":1}`), CheckInvalidField},
		{"done missing id", open + fr(`{"v":1,"type":"done"}`), CheckMissingField},
		{"stream missing stream", open + fr(`{"v":1,"type":"stream","id":"cell-1","data":"eA=="}`), CheckMissingField},
		{"stream bad stream", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdin","data":"eA=="}`), CheckInvalidStream},
		{"stream numeric stream", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":1,"data":"eA=="}`), CheckInvalidStream},
		{"stream missing data", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout"}`), CheckMissingField},
		{"stream empty data", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":""}`), CheckInvalidField},
		{"stream base64 without padding", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"eA"}`), CheckInvalidBase64},
		{"stream base64 with newline", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"eA==\n"}`), CheckInvalidBase64},
		{"stream base64 with CR", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"eHh4\reHh4"}`), CheckInvalidBase64},
		{"stream base64 with space", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"eHh4 eHh4"}`), CheckInvalidBase64},
		{"stream base64 url alphabet", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"-_-_"}`), CheckInvalidBase64},
		{"stream base64 bad padding bits", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"eB=="}`), CheckInvalidBase64},
		{"stream over the chunk cap", open + fr(`{"v":1,"type":"stream","id":"cell-1","stream":"stdout","data":"`+
			base64.StdEncoding.EncodeToString(make([]byte, MaxStreamChunk+1))+`"}`), CheckStreamTooLarge},
		{"exception missing kind", open + fr(`{"v":1,"type":"exception","id":"cell-1","name":"E"}`), CheckMissingField},
		{"exception bad kind", open + fr(`{"v":1,"type":"exception","id":"cell-1","kind":"oops","name":"E"}`), CheckInvalidField},
		{"exception missing name", open + fr(`{"v":1,"type":"exception","id":"cell-1","kind":"error"}`), CheckMissingField},
		{"exception legacy exc_type", open + fr(`{"v":1,"type":"exception","id":"cell-1","kind":"error","exc_type":"E"}`), CheckMissingField},
		{"exception empty name", open + fr(`{"v":1,"type":"exception","id":"cell-1","kind":"error","name":""}`), CheckInvalidField},
		{"exception numeric message", open + fr(`{"v":1,"type":"exception","id":"cell-1","kind":"error","name":"E","message":1}`), CheckInvalidField},
		{"exception numeric traceback", open + fr(`{"v":1,"type":"exception","id":"cell-1","kind":"error","name":"E","traceback":[]}`), CheckInvalidField},
		{"ready pid zero", fr(`{"v":1,"type":"ready","pid":0}`), CheckInvalidField},
		{"ready pid negative", fr(`{"v":1,"type":"ready","pid":-3}`), CheckInvalidField},
		{"ready pid float", fr(`{"v":1,"type":"ready","pid":12.5}`), CheckInvalidField},
		{"ready pid string", fr(`{"v":1,"type":"ready","pid":"12"}`), CheckInvalidField},
		{"fatal numeric reason", fr(`{"v":1,"type":"fatal","reason":3}`), CheckInvalidField},
		{"done negative dropped", open + fr(`{"v":1,"type":"done","id":"cell-1","dropped":-1}`), CheckInvalidField},
		{"done string dropped", open + fr(`{"v":1,"type":"done","id":"cell-1","dropped":"3"}`), CheckInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var whole Parser
			_, err := whole.Feed([]byte(tt.input))
			assertCheck(t, err, tt.check)
		})
	}
}

func TestParserAcceptsOptionalFieldsAsNull(t *testing.T) {
	var p Parser
	frames, err := p.Feed([]byte(fr(`{"v":1,"type":"ready","pid":null}`) +
		fr(`{"v":1,"type":"started","id":"c"}`) +
		fr(`{"v":1,"type":"exception","id":"c","kind":"system_exit","name":"SystemExit","message":null,"traceback":null}`) +
		fr(`{"v":1,"type":"exception","id":"c","kind":"unsupported_input","name":"UnsupportedInput","message":"m","traceback":"t"}`) +
		fr(`{"v":1,"type":"done","id":"c","dropped":null}`) +
		fr(`{"v":1,"type":"fatal","reason":null}`)))
	require.NoError(t, err)
	require.Len(t, frames, 6)
	assert.Equal(t, Frame{Type: Ready}, frames[0])
	assert.Equal(t, Frame{Type: Exception, ID: "c", Kind: "unsupported_input", Name: "UnsupportedInput", Message: "m", Traceback: "t"}, frames[3])
	assert.Equal(t, Frame{Type: Fatal}, frames[5])
}

func TestParserErrorSampleIsBounded(t *testing.T) {
	var p Parser
	_, err := p.Feed([]byte(strings.Repeat("A", 1000)))
	var pe *ProtocolError
	require.ErrorAs(t, err, &pe)
	assert.LessOrEqual(t, len(pe.Detail), 32*4+5, "detail %q", pe.Detail)
	assert.True(t, strings.HasSuffix(pe.Detail, "..."))
}
