package pump

import "sync"

// taskGroup counts a server's goroutines (its loop, its sweeps and their
// dispatches) so that Stop can wait, under a context, for the last one to
// end without starting a goroutine of its own to wait on a WaitGroup.
// A nil group counts nothing: a lone sweepOnce has none.
type taskGroup struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed whenever n is zero
}

func newTaskGroup() *taskGroup {
	g := &taskGroup{idle: make(chan struct{})}
	close(g.idle)
	return g
}

func (g *taskGroup) add() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
}

func (g *taskGroup) done() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 {
		close(g.idle)
	}
}

// wait returns a channel closed once no counted goroutine is left.
func (g *taskGroup) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.idle
}
