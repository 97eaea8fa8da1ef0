package approval

import (
	"github.com/asynkron/protoactor-go/actor"
)

// endedReason is the cancel reason of a watcher (docs/protocol.md,
// Approvals).
const endedReason = "execute_code dispatch ended"

const (
	whichSweep    = "sweep"
	whichDispatch = "dispatch"
	whichStopped  = "stopped"
)

func watcherProps(m *watch, hook func(watchStep)) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &watcher{id: m.id, sweep: m.sweep, dispatch: m.dispatch, hook: hook}
	})
}

// watcher cancels one prompt after its sweep ends and again after its
// dispatch ends, and stops once both cancels were answered. It is a child
// of the broker, so it never outlives it.
type watcher struct {
	id              string
	sweep, dispatch <-chan struct{}
	hook            func(watchStep)

	// quit ends the forwarding goroutines when the watcher stops first
	// (its broker stopping).
	quit chan struct{}
	// inflight lists, in order, which end each unanswered cancel was
	// sent for: the broker answers in the order it receives.
	inflight []string
	answered int
}

func (w *watcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.quit = make(chan struct{})
		self, root := ctx.Self(), ctx.ActorSystem().Root
		for which, ch := range map[string]<-chan struct{}{whichSweep: w.sweep, whichDispatch: w.dispatch} {
			go forwardClose(ch, w.quit, func() { root.Send(self, ended{which: which}) })
		}
	case ended:
		// A request rather than a call: the answer comes back as a
		// message, so the watcher never blocks on its broker.
		w.inflight = append(w.inflight, m.which)
		ctx.Request(ctx.Parent(), &cancel{id: w.id, reason: endedReason})
	case *transitionReply:
		w.onAnswer(ctx, m.err)
	case *actor.DeadLetterResponse:
		w.onAnswer(ctx, ErrUnavailable)
	case *actor.Stopping:
		close(w.quit)
	case *actor.Stopped:
		w.step(whichStopped, nil)
	}
}

func (w *watcher) onAnswer(ctx actor.Context, err error) {
	if len(w.inflight) == 0 {
		return
	}
	which := w.inflight[0]
	w.inflight = w.inflight[1:]
	w.step(which, err)
	if w.answered++; w.answered == 2 {
		ctx.Stop(ctx.Self())
	}
}

func (w *watcher) step(which string, err error) {
	if w.hook != nil {
		w.hook(watchStep{id: w.id, which: which, err: err})
	}
}

// forwardClose turns ch's close into one message; it only sends. A nil
// channel never closes.
func forwardClose(ch, quit <-chan struct{}, send func()) {
	select {
	case <-ch:
		send()
	case <-quit:
	}
}
