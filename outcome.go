package executecode

import (
	"time"

	"github.com/executecode/executecode/internal/proc"
	"github.com/executecode/executecode/kernelworker"
	"github.com/executecode/executecode/pump"
	"github.com/executecode/executecode/tools"
)

// outcome is what a run ended with, in either mode, before it is worded:
// its ending and the details the ending carries. format makes the one
// tool result of it.
type outcome struct {
	end ending
	// ran: some of the script may have run. Only a session cell can end
	// without (queued, refused, or failed around before it started).
	ran bool
	// exitCode is the code a fresh python3 exited, or would have exited,
	// with; nil when the run was stopped first.
	exitCode *int
	killedBy KilledBy
	// exit is the interpreter's own exit status (per call, and a cell's
	// crash), for the signal or the limit it names.
	exit      *proc.ExitStatus
	exception *kernelworker.Exception
	// reason is Details.Reason where the ending does not fix it
	// (endNotRun, endUnknown); note is endNotRun's headline.
	reason Reason
	note   string
	// output has been scrubbed as it streamed; a cell's already carries
	// what python3 would have printed at its end (a traceback, a
	// SystemExit's message). blocks are not scrubbed yet.
	output    proc.Output
	blocks    []string
	stats     pump.Stats
	statsLost bool
	scrub     *proc.Scrubber

	timeout time.Duration
	started time.Time
	// cell is set for a session cell, fallback for a session call that
	// ran isolated; neither for a per-call run.
	cell     *cellFacts
	fallback *fallbackFacts
	// sandbox is what the interpreter was confined with; the zero value
	// for one that ran unconfined or not at all.
	sandbox proc.Protections
}

// cellFacts are what a session result says about its kernel.
type cellFacts struct {
	reused, retained, resetPerformed bool
}

// fallbackFacts are what a session call that ran isolated says about it.
type fallbackFacts struct {
	reason         FallbackReason
	resetPerformed bool
}

// format builds the model-visible result of o (README.md, The result): the
// headline, the text() blocks, then the labelled diagnostics tail with its
// spill note. A cell's result is laid out and worded as a per-call run's
// where the ending exists in both modes, and every cell ending that loses
// the state says so.
func (r *Runtime) format(o outcome) Result {
	d := r.details(o)
	sp := spillOf(o.output)
	d.FullOutputPath = sp.path
	blocks := scrubAll(o.scrub, o.blocks)

	h, leads := r.headline(o)
	if o.cell != nil && o.end.saysState() {
		h = withState(h, o.cell.retained, o.ran)
	}
	var text string
	if len(blocks) > 0 {
		text = assemble(h, blocks, o.output.Text, sp)
	} else {
		text = historicText(h, o.output.Text, sp, leads)
	}
	trust := Trusted
	if _, web := o.stats.ToolsUsed[tools.Webfetch]; web || o.stats.Untrusted || d.RPCAccountingLoss {
		trust = Untrusted
	}
	res := textResult(text, d, trust, blocks)
	if o.fallback != nil {
		// Outside the untrusted wrapper: the runtime says it, not the
		// content.
		line := "Ran isolated in a fresh process (" + string(o.fallback.reason) + "); nothing from this run persists."
		res.Content[0].Text = line + "\n\n" + res.Content[0].Text
	}
	return res
}

// details is the machine-readable side of o; the key set tells the mode.
func (r *Runtime) details(o outcome) *Details {
	d := &Details{
		ExitCode:  o.exitCode,
		Truncated: o.output.Truncated,
		KilledBy:  o.killedBy,
		RPCCalls:  o.stats.Calls,
		RPCDenied: o.stats.Denied,
		RPCErrors: o.stats.Errors,
		RPCBytes:  o.stats.Bytes,
		RPCTools:  append([]string{}, o.stats.SortedTools()...),
	}
	if o.sandbox.ABI > 0 {
		st := statusOf(o.sandbox)
		d.Sandbox = &st
	}
	ms := max(time.Since(o.started).Milliseconds(), 0)
	switch {
	case o.cell != nil:
		reused, retained := o.cell.reused, o.cell.retained
		d.Persistent, d.KernelReused, d.StateRetained, d.DurationMS = true, &reused, &retained, &ms
		d.ResetPerformed = o.cell.resetPerformed
		d.RPCAccountingLoss = o.stats.AccountingLoss || o.statsLost
		d.Reason = reasons[o.end]
		if o.end == endNotRun || o.end == endUnknown {
			d.Reason = o.reason
		}
	case o.fallback != nil:
		no := false
		d.KernelReused, d.StateRetained, d.DurationMS = &no, &no, &ms
		d.ResetPerformed, d.FallbackReason = o.fallback.resetPerformed, o.fallback.reason
	}
	return d
}
