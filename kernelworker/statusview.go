package kernelworker

import (
	"sync/atomic"

	"github.com/executecode/executecode/internal/proc"
)

// StatusView is a worker's Status as of the last message the worker
// handled, read without sending it one: the registry checks a kernel it
// hands out again on every cell, and a StatusRequest there costs a round
// trip through the worker's mailbox. Only the worker writes it, after each
// message it handled that changed what a Status says; ProcessAlive is read
// from the process itself at Load, as the worker would answer it.
type StatusView struct {
	cur  atomic.Pointer[Status]
	proc *proc.Process
}

// Load returns the worker's current Status; nil for a nil view or a
// worker that never published one.
func (v *StatusView) Load() *Status {
	if v == nil {
		return nil
	}
	p := v.cur.Load()
	if p == nil {
		return nil
	}
	st := *p
	st.ProcessAlive = st.ProcessAlive && v.proc != nil && v.proc.Alive()
	return &st
}

// publish stores st when it differs from what the view holds.
func (v *StatusView) publish(st Status) {
	if old := v.cur.Load(); old != nil && old.Phase == st.Phase && old.QueueDepth == st.QueueDepth &&
		old.ActiveRequestID == st.ActiveRequestID && old.CellsCompleted == st.CellsCompleted &&
		old.ProcessAlive == st.ProcessAlive {
		return
	}
	v.cur.Store(&st)
}
