package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gate is a handler that blocks until released, recording what it got.
type gate struct {
	release chan struct{}
	mu      sync.Mutex
	got     []Event
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) Handle(e Event) {
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, e)
}

func (g *gate) events() []Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Event(nil), g.got...)
}

func TestEmitDoesNotWaitForASlowHandler(t *testing.T) {
	bus := &Bus{}
	slow := newGate()
	rec := &Recorder{}
	bus.Subscribe(slow)
	bus.Subscribe(rec)
	for i := range 10 {
		bus.Emit(CellStart{QueueDepth: i})
	}
	// The slow handler has not returned once, yet every Emit did and the
	// immediate recorder saw everything.
	assert.Len(t, rec.Events(), 10)
	assert.Empty(t, slow.events())
	close(slow.release)
	require.NoError(t, bus.Close(context.Background()))
	got := slow.events()
	require.Len(t, got, 10)
	for i, e := range got {
		assert.Equal(t, CellStart{QueueDepth: i}, e, "delivered in emission order")
	}
}

func TestAFullQueueDropsAndCounts(t *testing.T) {
	bus := &Bus{}
	slow := newGate()
	bus.SubscribeBuffered(slow, 3)
	for range 10 {
		bus.Emit(BridgeDeny{})
	}
	// One event may already be in the handler, three wait, the rest drop.
	assert.GreaterOrEqual(t, bus.Dropped(), uint64(6))
	assert.LessOrEqual(t, bus.Dropped(), uint64(7))
	close(slow.release)
	require.NoError(t, bus.Close(context.Background()))
	assert.Equal(t, uint64(10), uint64(len(slow.events()))+bus.Dropped())
}

func TestAPanickingHandlerIsContained(t *testing.T) {
	bus := &Bus{}
	rec := &Recorder{}
	var queued atomic.Int64
	bus.Subscribe(HandlerFunc(func(Event) { panic("queued handler") }))
	bus.Subscribe(immediateFunc(func(Event) { panic("immediate handler") }))
	bus.Subscribe(HandlerFunc(func(Event) { queued.Add(1) }))
	bus.Subscribe(rec)
	assert.NotPanics(t, func() { bus.Emit(Fallback{}); bus.Emit(Fallback{}) })
	require.NoError(t, bus.Flush(context.Background()))
	assert.Len(t, rec.Events(), 2)
	assert.Equal(t, int64(2), queued.Load())
	require.NoError(t, bus.Close(context.Background()))
}

type immediateFunc func(Event)

func (f immediateFunc) Handle(e Event) { f(e) }
func (immediateFunc) Immediate()       {}

func TestCloseDropsLaterEventsAndIsBoundedByItsContext(t *testing.T) {
	bus := &Bus{}
	stuck := newGate()
	bus.Subscribe(stuck)
	bus.Emit(Fallback{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, bus.Close(ctx), context.DeadlineExceeded, "a stuck handler cannot hold Close")
	bus.Emit(Fallback{})
	assert.Equal(t, uint64(1), bus.Dropped(), "an event after Close is dropped")
	close(stuck.release)
	require.NoError(t, bus.Close(context.Background()))
	assert.Len(t, stuck.events(), 1)
}

func TestUnsubscribeStopsDelivery(t *testing.T) {
	bus := &Bus{}
	rec := &Recorder{}
	var queued atomic.Int64
	stopRec := bus.Subscribe(rec)
	stopQueued := bus.Subscribe(HandlerFunc(func(Event) { queued.Add(1) }))
	bus.Emit(Fallback{})
	require.NoError(t, bus.Flush(context.Background()))
	stopRec()
	stopQueued()
	bus.Emit(Fallback{})
	require.NoError(t, bus.Close(context.Background()))
	assert.Len(t, rec.Events(), 1)
	assert.Equal(t, int64(1), queued.Load())
}

func TestNilAndZeroBusesAreSafe(t *testing.T) {
	var nilBus *Bus
	assert.NotPanics(t, func() {
		nilBus.Emit(Fallback{})
		nilBus.Subscribe(&Recorder{})()
		_ = nilBus.Close(context.Background())
	})
	zero := &Bus{}
	assert.NotPanics(t, func() { zero.Emit(Fallback{}); zero.Emit(nil) })
	assert.NoError(t, zero.Close(context.Background()))
}

func TestForwardReEmitsOnAnotherBus(t *testing.T) {
	inner, outer := &Bus{}, &Bus{}
	rec := &Recorder{}
	outer.Subscribe(rec)
	inner.Subscribe(Forward{To: outer})
	inner.Emit(SessionStart{LiveKernels: 1})
	assert.Equal(t, []Event{SessionStart{LiveKernels: 1}}, rec.Events())
}

func TestConcurrentEmittersLoseNothingBelowTheBuffer(t *testing.T) {
	bus := &Bus{}
	var got atomic.Int64
	bus.SubscribeBuffered(HandlerFunc(func(Event) { got.Add(1) }), 10000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				bus.Emit(CellStart{})
			}
		})
	}
	wg.Wait()
	require.NoError(t, bus.Close(context.Background()))
	assert.Equal(t, int64(4000), got.Load())
	assert.Zero(t, bus.Dropped())
}
