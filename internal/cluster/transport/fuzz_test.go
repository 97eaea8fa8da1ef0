package transport

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"

	"github.com/executecode/executecode/internal/cluster/wire"
)

// FuzzCheckBatch feeds a peer's raw batch bytes to the stream filter:
// nothing may panic, and a batch it admits is one protoactor's reader can
// take without indexing outside its tables or meeting a type it lacks,
// and holds no envelope of the liveness check's kinds.
func FuzzCheckBatch(f *testing.F) {
	watch, _ := proto.Marshal(&actor.Watch{Watcher: actor.NewPID("127.0.0.1:1", "w")})
	notify, _ := wire.Encode(&wire.Notify{Message: "m"}, "k1", 1)
	env, _ := proto.Marshal(notify)
	ping, _ := proto.Marshal(&wire.Envelope{Kind: pingKind, Seq: 1})
	pong, _ := proto.Marshal(&wire.Envelope{Kind: pongKind, Seq: 1})
	victim := []*actor.PID{actor.NewPID("127.0.0.1:1", "v")}
	for _, b := range []*remote.MessageBatch{
		{TypeNames: []string{envelopeType}, Targets: victim,
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0}}},
		{TypeNames: []string{envelopeType}, Targets: victim,
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: env}}},
		{TypeNames: []string{envelopeType}, Targets: victim,
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: ping}, {TypeId: 0, Target: 0, MessageData: pong}}},
		{TypeNames: []string{"actor.Watch"}, Targets: victim,
			Senders:   []*actor.PID{actor.NewPID("127.0.0.1:2", "s")},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, Sender: 1, MessageData: watch}}},
		{TypeNames: []string{"actor.Stop"}, Envelopes: []*remote.MessageEnvelope{{TypeId: 5, Target: -1}}},
	} {
		data, _ := proto.Marshal(b)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b remote.MessageBatch
		if proto.Unmarshal(data, &b) != nil {
			return
		}
		if checkBatch(&b) != nil {
			return
		}
		for _, e := range b.GetEnvelopes() {
			name := b.GetTypeNames()[e.GetTypeId()]
			if !allowedTypes[name] || b.GetTargets()[e.GetTarget()] == nil || int(e.GetSender()) > len(b.GetSenders()) {
				t.Fatalf("admitted an envelope the reader cannot take: %v", e)
			}
			if name != envelopeType {
				continue
			}
			var env wire.Envelope
			if proto.Unmarshal(e.GetMessageData(), &env) == nil && (env.GetKind() == pingKind || env.GetKind() == pongKind) {
				t.Fatalf("admitted a liveness envelope in a batch: %v", &env)
			}
		}
	})
}

// FuzzCheckPing feeds a peer's raw bytes to the liveness stream's check:
// what it admits is a ping and nothing more.
func FuzzCheckPing(f *testing.F) {
	for _, env := range []*wire.Envelope{
		{Kind: pingKind, Seq: 1},
		{Kind: pongKind, Seq: 1},
		{Kind: pingKind, Seq: 7, Incarnation: "k1"},
		{Kind: pingKind, Payload: []byte("{}")},
	} {
		data, _ := proto.Marshal(env)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var env wire.Envelope
		if proto.Unmarshal(data, &env) != nil {
			return
		}
		if checkPing(&env) != nil {
			return
		}
		if env.GetKind() != pingKind || env.GetIncarnation() != "" || len(env.GetPayload()) != 0 {
			t.Fatalf("admitted %v as a ping", &env)
		}
	})
}
