package transport

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
)

// FuzzCheckBatch feeds a peer's raw batch bytes to the stream filter:
// nothing may panic, and a batch it admits is one protoactor's reader can
// take without indexing outside its tables or meeting a type it lacks.
func FuzzCheckBatch(f *testing.F) {
	watch, _ := proto.Marshal(&actor.Watch{Watcher: actor.NewPID("127.0.0.1:1", "w")})
	for _, b := range []*remote.MessageBatch{
		{TypeNames: []string{"executecode.cluster.Envelope"}, Targets: []*actor.PID{actor.NewPID("127.0.0.1:1", "v")},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0}}},
		{TypeNames: []string{"actor.Watch"}, Targets: []*actor.PID{actor.NewPID("127.0.0.1:1", "v")},
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
		}
	})
}
