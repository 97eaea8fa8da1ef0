package kernelworker

import (
	"time"
)

// cell is one Execute from its arrival to its one CellResult.
type cell struct {
	req    *Execute
	ticket uint64 // identifies the cell to its caller-gone watch
	// unwatch ends the caller-gone watch (context.AfterFunc's stop).
	unwatch func() bool

	// Set at dispatch.
	id         string
	capture    *Capture
	lastStream string
	dispatched time.Time
	started    time.Time
	exception  *Exception

	output        Output
	outputDone    bool
	replied       bool
	cancelEmitted bool
}

// elapsed is kernel.md §1.4's duration_ms: from the started frame, or the
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

// stream appends a decoded stream chunk to the capture. A change of
// stream first settles what the sanitizer held back of the other one, so
// a split character or escape sequence never joins bytes of two streams.
func (c *cell) stream(name string, data []byte) {
	if c.lastStream != "" && c.lastStream != name {
		c.capture.Break()
	}
	c.lastStream = name
	_, _ = c.capture.Write(data)
}

// finishOutput ends the capture once and returns what it kept; later
// calls return the same Output (a timed-out capture is never finished
// twice, kernel.md §4.9).
func (c *cell) finishOutput(release func(string)) Output {
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
