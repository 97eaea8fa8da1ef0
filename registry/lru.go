package registry

// idleList holds the kernels that have no lease, least recently used
// first. Links live in the entries themselves, so checkout, release and
// finding the eviction candidate are O(1) however many kernels are live.
type idleList struct {
	oldest, newest *entry
	n              int
}

func (l *idleList) pushNewest(e *entry) {
	if e.inIdle {
		l.remove(e)
	}
	e.inIdle = true
	e.older, e.newer = l.newest, nil
	if l.newest != nil {
		l.newest.newer = e
	} else {
		l.oldest = e
	}
	l.newest = e
	l.n++
}

func (l *idleList) remove(e *entry) {
	if !e.inIdle {
		return
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		l.oldest = e.newer
	}
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		l.newest = e.older
	}
	e.older, e.newer, e.inIdle = nil, nil, false
	l.n--
}
