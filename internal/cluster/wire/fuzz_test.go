package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzDecode feeds a peer's raw bytes through what a node does with them:
// protobuf, then Decode. Nothing may panic, and what Decode accepts must
// encode again and decode to the same payload.
func FuzzDecode(f *testing.F) {
	for _, p := range []any{
		&RunCell{Code: "x = 1", Bridge: PID{Address: "127.0.0.1:1", ID: "b"}, TimeoutMS: 5, Tools: []string{"read"}},
		&ToolCall{ID: 1, Tool: "read", Params: map[string]any{"path": "a", "n": 1.5, "l": []any{true, nil}}},
		&CellResult{Output: "o", Stats: Stats{Calls: 1}},
		&NodeHello{Node: PID{Address: "[::1]:80", ID: "kernelhost"}, Incarnation: "n", Capacity: 1},
	} {
		env, err := Encode(p, "k1", 1)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := proto.Marshal(env)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var env Envelope
		if proto.Unmarshal(b, &env) != nil {
			return
		}
		v, err := Decode(&env)
		if err != nil {
			return
		}
		again, err := Encode(v, env.GetIncarnation(), env.GetSeq())
		if err != nil {
			t.Fatalf("accepted payload does not encode: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("re-encoded payload refused: %v", err)
		}
	})
}
