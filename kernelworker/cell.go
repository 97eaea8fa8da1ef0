package kernelworker

import (
	"time"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker/internal/frame"
)

// cell is one Execute from its arrival to its one CellResult.
type cell struct {
	req    *Execute
	ticket uint64 // identifies the cell to its caller-gone watch
	// unwatch ends the caller-gone watch (context.AfterFunc's stop).
	unwatch func() bool
	// expiry fires queueExpired at the request's Deadline while the cell
	// waits in the queue.
	expiry *time.Timer
	// held is the result of a timed-out cell, sent once its kernel (and
	// every process of its session) is gone.
	held *CellResult

	// Set at dispatch.
	id         string
	capture    *proc.Capture
	dispatched time.Time
	started    time.Time
	exception  *Exception

	output        proc.Output
	outputDone    bool
	replied       bool
	cancelEmitted bool
}

// elapsed is the cell's duration_ms: from the started frame, or the
// dispatch when none arrived; 0 for a cell that never ran.
func (c *cell) elapsed(now time.Time) time.Duration {
	switch {
	case !c.started.IsZero():
		return now.Sub(c.started)
	case !c.dispatched.IsZero():
		return now.Sub(c.dispatched)
	}
	return 0
}

// stream appends a decoded stream chunk to the capture. The kernel's fd 1
// and fd 2 share one pipe, so every chunk, whatever stream it names,
// continues the one stream written so far: a character or a path split
// between two reads is joined again.
func (c *cell) stream(data []byte) {
	_, _ = c.capture.Write(data)
}

// cleanException is f's exception as the model may see it: sanitized like
// the output (a message can carry escape sequences and control bytes),
// then scrubbed with the cell's patterns.
func (c *cell) cleanException(f frame.Frame) *Exception {
	clean := func(s string) string { return c.req.Scrub.String(proc.SanitizeString(s)) }
	return &Exception{Kind: f.Kind, Name: clean(f.Name), Message: clean(f.Message), Traceback: clean(f.Traceback)}
}

// finishOutput ends the capture once and returns what it kept; later
// calls return the same Output (a timed-out capture is never finished
// twice).
func (c *cell) finishOutput(release func(string)) proc.Output {
	if c.capture == nil || c.outputDone {
		return c.output
	}
	c.outputDone = true
	_ = c.capture.Close()
	c.output = c.capture.Result()
	if release != nil && c.output.SpillPath != "" {
		release(c.output.SpillPath)
	}
	return c.output
}
