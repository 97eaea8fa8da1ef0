package proc

import (
	"context"
	"sync"
	"time"
)

// pool keeps interpreters started ahead for one shape, the runtime's
// default (KeepWarm): each fresh, forked by the Spawner's thread like any
// child and registered with the guard, past python's start-up and waiting
// for a run, which takes it whole; nothing of one run ever reaches
// another's interpreter. A take starts a replacement in the background.
// An interpreter idle for the idle timeout is ended and not replaced
// until the next start of the shape asks for one.
type pool struct {
	s *Spawner
	// ctx bounds the pool's own forks; cancelled by close.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	n        int
	idle     time.Duration
	template func() (Command, bool)
	// key is the template's shape when it was last asked; only a start
	// of that shape refills the pool.
	key string
	// warm are started and not taken, oldest first: waiting for a run, or
	// still in their start-up.
	warm    []*interp
	filling int
	// landed is closed, and replaced, whenever a fill's fork lands.
	landed chan struct{}
	// dormant: the idle timeout emptied the pool; the next start of its
	// shape refills it.
	dormant bool
	closed  bool
	timer   *time.Timer
}

func newPool(s *Spawner) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{s: s, ctx: ctx, cancel: cancel, landed: make(chan struct{})}
}

// KeepWarm keeps n interpreters of template's shape started ahead (n 0:
// none), each ended once idle for idle (0: never). template is asked for
// a Command at every refill, so a changed environment makes the next
// ones of the new shape (those of the old are ended); its per-run fields
// (Main, Args, Dir's effect on the run, ExtraFiles, Output, Limits but
// for MemoryMB's effect on the environment, the Sandbox's rules) are not
// used. ok false from template starts none for now. A Start of that
// shape takes one instead of forking; any other shape starts cold.
func (s *Spawner) KeepWarm(n int, idle time.Duration, template func() (cmd Command, ok bool)) {
	p := s.pool
	key := ""
	if cmd, ok := template(); ok && n > 0 {
		key = shapeOf(cmd).key
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.n, p.idle, p.template, p.dormant = max(n, 0), idle, template, false
	var drop []*interp
	if key != "" {
		p.key = key
		drop = p.dropLocked(func(it *interp) bool { return it.sh.key != p.key })
	} else {
		p.key = ""
		drop, p.warm = p.warm, nil
	}
	for len(p.warm) > p.n {
		drop = append(drop, p.warm[len(p.warm)-1])
		p.warm = p.warm[:len(p.warm)-1]
	}
	p.refillLocked()
	p.mu.Unlock()
	discardAll(drop)
}

// Warm counts the interpreters waiting for a run now.
func (s *Spawner) Warm() int {
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, it := range p.warm {
		if it.isReady() {
			n++
		}
	}
	return n
}

// take hands out the oldest warm interpreter of key, or nil. For the
// pool's own shape it never forks beside the pool: with none warm it
// starts the pool's fill (the replacement on demand) if none is under
// way and waits, within ctx, for that fork to land, then takes it still
// in its start-up; two start-ups at once would only compete. A take of
// the pool's own shape starts the replacements.
func (p *pool) take(ctx context.Context, key string) *interp {
	if !p.own(key) {
		return nil
	}
	for waited := false; ; waited = true {
		p.mu.Lock()
		if p.closed || key != p.key {
			p.mu.Unlock()
			return nil
		}
		var got *interp
		for i, it := range p.warm {
			if it.sh.key == key {
				got = it
				p.warm = append(p.warm[:i:i], p.warm[i+1:]...)
				break
			}
		}
		p.dormant = false
		if got == nil && p.filling == 0 && !waited {
			p.refillLocked()
		}
		if got != nil && !got.isReady() {
			// Its replacement starts once it is past its start-up: two
			// start-ups at once would only slow this one.
			p.wg.Add(1)
			go p.refillOnceReady(got)
			p.mu.Unlock()
			return got
		}
		if got != nil || p.filling == 0 {
			// Taken, or nothing under way (a fork that failed is left to
			// the start's own, which reports why).
			p.refillLocked()
			p.mu.Unlock()
			return got
		}
		landed := p.landed
		p.mu.Unlock()
		select {
		case <-landed:
		case <-ctx.Done():
			return nil
		}
	}
}

// refillOnceReady starts the replacements once it waits for its run, or
// died trying.
func (p *pool) refillOnceReady(it *interp) {
	defer p.wg.Done()
	select {
	case <-it.ready:
	case <-p.ctx.Done():
		return
	}
	p.mu.Lock()
	p.refillLocked()
	p.mu.Unlock()
}

// own says whether key is the pool's shape. The shape of the pool's runs
// changes with the host's environment: a start of the template's shape as
// it is now is the pool's, and what the pool kept of the old is stale.
func (p *pool) own(key string) bool {
	p.mu.Lock()
	template, own, off := p.template, key == p.key, p.closed || p.n == 0
	p.mu.Unlock()
	if own || off || template == nil {
		return own && !off
	}
	cmd, ok := template()
	if !ok || shapeOf(cmd).key != key {
		return false
	}
	p.mu.Lock()
	p.key = key
	stale := p.dropLocked(func(it *interp) bool { return it.sh.key != key })
	p.mu.Unlock()
	discardAll(stale)
	return true
}

// landLocked tells the takes waiting for a fork that one landed (or
// failed).
func (p *pool) landLocked() {
	close(p.landed)
	p.landed = make(chan struct{})
}

func (p *pool) refillLocked() {
	if p.closed || p.dormant || p.template == nil {
		return
	}
	for need := p.n - len(p.warm) - p.filling; need > 0; need-- {
		p.filling++
		p.wg.Add(1)
		go p.fill()
	}
}

// fill starts one interpreter for the pool and, once it waits for a run,
// lets the idle timer know.
func (p *pool) fill() {
	defer p.wg.Done()
	p.mu.Lock()
	template := p.template
	p.mu.Unlock()
	var it *interp
	if cmd, ok := template(); ok {
		it, _ = p.s.fork(p.ctx, shapeOf(cmd))
	}
	p.mu.Lock()
	p.filling--
	if it == nil {
		// A failed fork is not retried here: the next take asks again,
		// and its own cold start reports the failure.
		p.landLocked()
		p.mu.Unlock()
		return
	}
	if p.closed || len(p.warm) >= p.n {
		p.landLocked()
		p.mu.Unlock()
		it.discard()
		return
	}
	var stale []*interp
	if it.sh.key != p.key {
		// The environment changed since the pool's shape was taken: the
		// new shape is the one runs will ask for.
		p.key = it.sh.key
		stale = p.dropLocked(func(o *interp) bool { return o.sh.key != p.key })
	}
	p.warm = append(p.warm, it)
	p.landLocked()
	p.mu.Unlock()
	discardAll(stale)

	select {
	case <-it.ready:
	case <-p.ctx.Done():
		return // close ends it
	}
	p.mu.Lock()
	if it.readyErr != nil {
		// It died in its start-up (someone killed it, or a site hook
		// broke): never handed out.
		dead := p.dropLocked(func(o *interp) bool { return o == it })
		p.mu.Unlock()
		discardAll(dead)
		return
	}
	p.armLocked()
	p.mu.Unlock()
}

// dropLocked removes the warm interpreters f selects and returns them.
func (p *pool) dropLocked(f func(*interp) bool) []*interp {
	var out []*interp
	keep := p.warm[:0]
	for _, it := range p.warm {
		if f(it) {
			out = append(out, it)
		} else {
			keep = append(keep, it)
		}
	}
	clear(p.warm[len(keep):])
	p.warm = keep
	return out
}

// armLocked sets the idle timer for the oldest warm interpreter.
func (p *pool) armLocked() {
	if p.idle <= 0 || p.closed || len(p.warm) == 0 {
		return
	}
	due := time.Until(p.warm[0].started.Add(p.idle))
	if p.timer == nil {
		p.timer = time.AfterFunc(max(due, 0), p.reap)
		return
	}
	p.timer.Reset(max(due, 0))
}

// reap ends the interpreters idle for the idle timeout; the pool then
// waits for a start of its shape to refill.
func (p *pool) reap() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	old := p.dropLocked(func(it *interp) bool { return now.Sub(it.started) >= p.idle })
	if len(old) > 0 {
		p.dormant = true
	}
	p.armLocked()
	p.mu.Unlock()
	discardAll(old)
}

// close ends every warm interpreter and every fork still in flight, and
// returns once they are all gone.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	all := p.warm
	p.warm = nil
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.cancel()
	discardAll(all)
	p.wg.Wait()
}

func discardAll(its []*interp) {
	for _, it := range its {
		it.discard()
	}
}
