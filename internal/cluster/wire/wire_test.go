package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

var bridge = PID{Address: "127.0.0.1:4100", ID: "bridge-1"}

// Every kind survives the trip through protobuf bytes unchanged.
func TestEveryKindRoundTripsThroughProtobuf(t *testing.T) {
	payloads := []any{
		&NodeHello{Node: PID{Address: "127.0.0.1:4200", ID: "kernelhost"}, Incarnation: "n-1", Capacity: 8},
		&NodeWelcome{Directory: PID{Address: "127.0.0.1:4100", ID: "nodes"}, Incarnation: "s-1"},
		&StartKernel{Key: "abc", Generation: 3, Owner: bridge, HelperSource: "x = 1\n", MaxQueuedCells: 4, Limits: Limits{CPUSeconds: 30}},
		&KernelStarted{Kernel: PID{Address: "127.0.0.1:4200", ID: "kernelhost/kernel-abc-k1"}},
		&StopKernel{Reason: "shutdown"},
		&RunCell{Code: "x = 1", Bridge: bridge, TimeoutMS: 1000, Tools: []string{"read"}, Policy: Policy{Deny: []string{"grep"}}, MaxCalls: 5},
		&CellResult{Output: "hi\n", StateRetained: true, Blocks: []string{"hi"}, Stats: Stats{Calls: 1, ToolsUsed: []string{"read"}},
			Exception: &Exception{Kind: "exception", Name: "ValueError", Message: "m", Traceback: "tb"}},
		&CancelCell{},
		&Notify{Message: "50%"},
		&ToolCall{ID: 7, Tool: "read", Params: map[string]any{"path": "go.mod"}, ApprovalID: "ap-1", Gated: true},
		&ToolAnswer{OK: true, Text: `{"a":1}`, JSON: true},
		&Refused{Reason: "no capacity"},
	}
	for _, p := range payloads {
		env, err := Encode(p, "k1", 9)
		require.NoError(t, err)
		b, err := proto.Marshal(env)
		require.NoError(t, err)
		var back Envelope
		require.NoError(t, proto.Unmarshal(b, &back))
		got, err := Decode(&back)
		require.NoError(t, err, "kind %s", env.Kind)
		assert.Equal(t, p, got)
		assert.Equal(t, uint64(9), back.GetSeq())
	}
}

func TestDecodeRefusesWhatAPeerMustNotSend(t *testing.T) {
	cases := []struct {
		name    string
		env     *Envelope
		want    error
		mention string
	}{
		{"no envelope", nil, ErrMalformed, "no envelope"},
		{"unknown kind", &Envelope{Kind: "kernel.exec", Incarnation: "k1", Payload: []byte(`{}`)}, ErrUnknownKind, "kernel.exec"},
		{"control characters in the kind", &Envelope{Kind: "x\x00\x1b[2J", Incarnation: "k1"}, ErrUnknownKind, `x??[2J`},
		{"no incarnation", &Envelope{Kind: string(KindCancelCell), Payload: []byte(`{}`)}, ErrMalformed, "incarnation"},
		{"incarnation with a slash", &Envelope{Kind: string(KindCancelCell), Incarnation: "a/b", Payload: []byte(`{}`)}, ErrMalformed, "incarnation"},
		{"not JSON", &Envelope{Kind: string(KindNotify), Incarnation: "k1", Payload: []byte(`{"message":`)}, ErrMalformed, "cut short"},
		{"empty payload", &Envelope{Kind: string(KindNotify), Incarnation: "k1"}, ErrMalformed, "empty"},
		{"unknown field", &Envelope{Kind: string(KindNotify), Incarnation: "k1", Payload: []byte(`{"message":"a","exec":"rm"}`)}, ErrMalformed, `unknown field "exec"`},
		{"trailing data", &Envelope{Kind: string(KindNotify), Incarnation: "k1", Payload: []byte(`{"message":"a"} {}`)}, ErrMalformed, "after the payload"},
		{"wrong type", &Envelope{Kind: string(KindToolCall), Incarnation: "k1", Payload: []byte(`{"id":"7","tool":"read"}`)}, ErrMalformed, `"id"`},
		{"too large", &Envelope{Kind: string(KindNotify), Incarnation: "k1", Payload: make([]byte, MaxPayloadBytes+1)}, ErrPayloadTooLarge, "at most"},
		{"pid without a port", &Envelope{Kind: string(KindKernelStarted), Incarnation: "k1", Payload: []byte(`{"kernel":{"address":"127.0.0.1","id":"k"}}`)}, ErrMalformed, "kernel.address"},
		{"zero capacity", &Envelope{Kind: string(KindNodeHello), Incarnation: "k1", Payload: []byte(`{"node":{"address":"127.0.0.1:1","id":"kernelhost"},"incarnation":"n1","capacity":0}`)}, ErrMalformed, "capacity"},
		{"no timeout", &Envelope{Kind: string(KindRunCell), Incarnation: "k1", Payload: []byte(`{"code":"x","bridge":{"address":"127.0.0.1:1","id":"b"},"timeout_ms":0,"tools":[]}`)}, ErrMalformed, "timeout_ms"},
		{"negative budget", &Envelope{Kind: string(KindRunCell), Incarnation: "k1", Payload: []byte(`{"code":"x","bridge":{"address":"127.0.0.1:1","id":"b"},"timeout_ms":5,"max_calls":-1}`)}, ErrMalformed, "negative"},
		{"tool with a newline", &Envelope{Kind: string(KindToolCall), Incarnation: "k1", Payload: []byte(`{"id":1,"tool":"re\nad"}`)}, ErrMalformed, "control character"},
		{"negative stats", &Envelope{Kind: string(KindCellResult), Incarnation: "k1", Payload: []byte(`{"output":"","state_retained":true,"stats":{"calls":-1}}`)}, ErrMalformed, "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := Decode(c.env)
			require.ErrorIs(t, err, c.want)
			assert.Nil(t, v)
			assert.Contains(t, err.Error(), c.mention)
			if c.env != nil && len(c.env.Payload) > 0 {
				assert.NotContains(t, err.Error(), string(c.env.Payload), "an error never quotes the payload")
			}
		})
	}
}

func TestEncodeRefusesWhatItWouldNotAccept(t *testing.T) {
	_, err := Encode(struct{}{}, "k1", 0)
	require.ErrorIs(t, err, ErrWrongPayloadType)
	_, err = Encode(&Notify{Message: strings.Repeat("x", MaxPayloadBytes)}, "k1", 0)
	require.ErrorIs(t, err, ErrPayloadTooLarge)
	_, err = Encode(&ToolCall{ID: -1, Tool: "read"}, "k1", 0)
	require.ErrorIs(t, err, ErrMalformed)
}
