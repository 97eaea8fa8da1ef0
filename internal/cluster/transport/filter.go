package transport

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

const envelopeType = "executecode.cluster.Envelope"

// allowedTypes are the message types a peer may send in a batch: the
// cluster's envelope, and what the remote needs to watch across nodes and
// to fail a request to a dead actor. Everything else, a spawn request to
// the activator or a stop of any actor included, is refused: a peer
// reaches this node's actors only through the envelope.
var allowedTypes = map[string]bool{
	envelopeType:               true,
	"actor.Watch":              true,
	"actor.Unwatch":            true,
	"actor.Terminated":         true,
	"actor.DeadLetterResponse": true,
}

// checkMessage admits a message of the remote's stream.
func checkMessage(m any) error {
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if b := rm.GetMessageBatch(); b != nil {
		if err := checkBatch(b); err != nil {
			return status.Error(codes.PermissionDenied, "message refused: "+err.Error())
		}
	}
	return nil
}

// checkBatch admits a batch whose every type is allowed, serialized as
// protobuf, whose every index points into its tables, and whose
// envelopes are not the liveness check's, which travel on its own stream.
func checkBatch(b *remote.MessageBatch) error {
	for _, name := range b.GetTypeNames() {
		if !allowedTypes[name] {
			return fmt.Errorf("type %.64q", name)
		}
	}
	types, senders, targets := len(b.GetTypeNames()), len(b.GetSenders()), len(b.GetTargets())
	for _, e := range b.GetEnvelopes() {
		if e.GetSerializerId() != 0 {
			return errors.New("serializer")
		}
		if int(e.GetTypeId()) < 0 || int(e.GetTypeId()) >= types {
			return errors.New("type index")
		}
		if int(e.GetTarget()) < 0 || int(e.GetTarget()) >= targets {
			return errors.New("target index")
		}
		// Sender 0 means none; others are 1-based into Senders.
		if s := int(e.GetSender()); s < 0 || s > senders {
			return errors.New("sender index")
		}
		if b.GetTargets()[e.GetTarget()] == nil {
			return errors.New("no target")
		}
		if err := checkPayload(b.GetTypeNames()[e.GetTypeId()], e.GetMessageData()); err != nil {
			return err
		}
	}
	return nil
}

// checkPayload decodes the remote's own watch messages, which the library
// dereferences without a check: each must name its actors. Of an
// envelope it reads only the kind, skipping the payload without a copy.
func checkPayload(name string, data []byte) error {
	var pids []*actor.PID
	switch name {
	case envelopeType:
		kind, err := envelopeKind(data)
		if err != nil {
			return err
		}
		if kind == pingKind || kind == pongKind {
			return errors.New("liveness kind in a batch")
		}
	case "actor.Watch":
		var m actor.Watch
		if proto.Unmarshal(data, &m) != nil {
			return errors.New("watch")
		}
		pids = []*actor.PID{m.GetWatcher()}
	case "actor.Unwatch":
		var m actor.Unwatch
		if proto.Unmarshal(data, &m) != nil {
			return errors.New("unwatch")
		}
		pids = []*actor.PID{m.GetWatcher()}
	case "actor.Terminated":
		var m actor.Terminated
		if proto.Unmarshal(data, &m) != nil {
			return errors.New("terminated")
		}
		pids = []*actor.PID{m.GetWho()}
	}
	for _, p := range pids {
		if p == nil {
			return errors.New(name + " without its actor")
		}
	}
	return nil
}

// envelopeKind is an encoded envelope's kind field (the last one, as
// protobuf decodes it); an envelope that is not valid protobuf is refused.
func envelopeKind(b []byte) (string, error) {
	var kind []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", errors.New("envelope")
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", errors.New("envelope")
			}
			kind, b = v, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", errors.New("envelope")
		}
		b = b[n:]
	}
	return string(kind), nil
}
