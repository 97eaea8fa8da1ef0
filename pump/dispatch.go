package pump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/tools"
)

// outcome is a dispatched call's normalised result.
type outcome struct {
	ok        bool
	text      string // content when ok, else the error message
	untrusted bool
	// json says text is one JSON document, which the shim decodes.
	json bool
	// blocked says approval stopped the call: it is answered text and
	// counted as a denial, not an error.
	blocked bool
}

// dispatch runs the claims in waves of MaxParallel, in claim order. Each
// wave's calls run concurrently; the sweep awaits them in claim order and
// accounts and answers each as soon as it is awaited, so the result-byte
// budget is spent serially. The next wave starts only after the whole
// current wave finished.
func (s *sweeper) dispatch(ctx context.Context, claims []claim) error {
	step := s.cfg.MaxParallel
	for start := 0; start < len(claims); start += step {
		if ctx.Err() != nil {
			s.abandon(claims[start:])
			return ctx.Err()
		}
		wave := claims[start:min(start+step, len(claims))]
		results := make([]chan outcome, len(wave))
		for i, c := range wave {
			// Buffered: a call finishing after its sweep was abandoned
			// never blocks.
			results[i] = make(chan outcome, 1)
			s.bridge.tasks.add()
			go runTool(ctx, &s.cfg, s.bridge.tasks, c, results[i])
		}
		for i, c := range wave {
			var o outcome
			select {
			case o = <-results[i]:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				s.abandon(claims[start+i:])
				return ctx.Err()
			}
			s.settle(c, o)
		}
	}
	return nil
}

// abandon is what a killed sweep leaves behind: claims charged (at claim
// time) and unanswered, their markers in place for recovery. Each counts
// as one error, so the figures equal what recovery charges a dead sweep's
// claims when its stats are lost instead.
func (s *sweeper) abandon(rest []claim) {
	s.abandoned += len(rest)
	s.stats.Errors += len(rest)
	if len(rest) > 0 {
		s.cfg.Logger.Debug().Int("claims", len(rest)).Msg("execute_code rpc sweep cancelled with claims in flight")
	}
}

// runTool calls the tool (after its approval, when the claim is gated) and
// always delivers exactly one outcome: a panic (or a Goexit) inside the
// tool becomes an error answer and never reaches the sweep. It only reads
// cfg, which nothing writes after settling, so it may outlive an abandoned
// sweep. ctx is the sweep's: it ends when the sweep does.
func runTool(ctx context.Context, cfg *Config, tasks *taskGroup, c claim, out chan<- outcome) {
	defer tasks.done()
	var o outcome
	finished := false
	defer func() {
		if !finished {
			r := recover()
			cfg.Logger.Error().Str("tool", c.tool).Int64("id", c.id).Str("panic", typeName(r)).
				Msg("execute_code rpc tool panicked")
			o = outcome{text: panicMessage(r)}
		}
		out <- o
	}()
	if c.gated {
		// Closed when this dispatch ends, however it ends: the watcher's
		// second cancel then runs strictly after anything this goroutine
		// could have registered.
		dispatchDone := make(chan struct{})
		defer close(dispatchDone)
		if blocked, approved := awaitApproval(ctx, cfg, c, dispatchDone); !approved {
			o, finished = blocked, true
			return
		}
	}
	res, err := cfg.Tools[c.tool].Execute(ctx, c.params)
	if err != nil {
		var ue *tools.UntrustedError
		o = outcome{text: err.Error(), untrusted: errors.As(err, &ue)}
	} else {
		o = resultOutcome(c.tool, res)
	}
	finished = true
}

// awaitApproval asks the broker for the call's approval under its
// pre-allocated id (docs/protocol.md, Approvals). First it starts the
// watcher that cancels the prompt after the sweep ends and again after this
// dispatch ends, so no prompt outlives both. approved is false for every
// outcome but an approval; blocked is then the call's answer. A broker
// failure, a panic included, blocks the call: approval fails closed.
func awaitApproval(ctx context.Context, cfg *Config, c claim, dispatchDone <-chan struct{}) (blocked outcome, approved bool) {
	cfg.Approvals.Watch(c.approvalID, ctx.Done(), dispatchDone)
	res, err := requestApproval(ctx, cfg, c)
	phrase := phraseApprovalDenied // deny, and a cancelled prompt
	switch {
	case err != nil:
		cfg.Logger.Warn().Str("tool", c.tool).Int64("id", c.id).Str("cause", approvalFailure(err)).
			Msg("execute_code rpc approval failed")
		phrase = phraseApprovalFailed
	case res.Approved:
		return outcome{}, true
	case res.TimedOut:
		phrase = phraseApprovalTimedOut
	}
	return outcome{blocked: true, text: msgApproval(phrase, c.tool)}, false
}

// errApprovalPanic is a panic inside the broker's Request, contained.
var errApprovalPanic = errors.New("approval request panicked")

// approvalFailure names a failed approval's cause for a log line: a
// bounded class, never the error's text (a host's Approver may say
// anything) and never the approval id.
func approvalFailure(err error) string {
	switch {
	case errors.Is(err, approval.ErrApproverFailed):
		return "approver_failed"
	case errors.Is(err, approval.ErrUnavailable):
		return "broker_unavailable"
	case errors.Is(err, errApprovalPanic):
		return "panic"
	}
	return "other"
}

func requestApproval(ctx context.Context, cfg *Config, c claim) (res approval.Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s", errApprovalPanic, typeName(r))
		}
	}()
	ac := cfg.ApprovalContext
	return cfg.Approvals.Request(ctx, approval.Request{
		ID:        c.approvalID,
		Tool:      c.tool,
		Args:      c.params,
		Rationale: "Tool execution: " + c.tool,
		SessionID: ac.SessionID,
		AgentID:   ac.AgentID,
		Timeout:   ac.Timeout,
		Caller:    ac.Caller,
	})
}

// panicMessage keeps a tool's own words (a panic with an error or a
// string) and hides Go runtime faults, which say nothing about the call.
func panicMessage(r any) string {
	var rerr runtime.Error
	switch v := r.(type) {
	case error:
		if errors.As(v, &rerr) {
			return msgRequestFailed
		}
		return v.Error()
	case string:
		return v
	}
	return msgRequestFailed
}

// typeName names a panic value's type for logs: never its payload, which
// could carry anything.
func typeName(v any) string { return fmt.Sprintf("%T", v) }

// resultOutcome is a successful call's answer: a result of exactly one
// JSON block travels as JSON (the shim decodes it into a dict, list or
// scalar); a JSON block that does not parse is the tool's error, named.
func resultOutcome(tool string, res tools.Result) outcome {
	if len(res.Content) == 1 && res.Content[0].Type == tools.TypeJSON {
		if !json.Valid([]byte(res.Content[0].Text)) {
			return outcome{text: msgInvalidJSON(tool)}
		}
		return outcome{ok: true, json: true, text: res.Content[0].Text, untrusted: res.Untrusted}
	}
	return outcome{ok: true, text: contentText(res), untrusted: res.Untrusted}
}

// contentText joins text blocks with "\n"; any other block is shown as
// "[non-text content omitted]".
func contentText(r tools.Result) string {
	if len(r.Content) == 1 && r.Content[0].Type == "text" {
		return r.Content[0].Text
	}
	parts := make([]string, len(r.Content))
	for i, c := range r.Content {
		if c.Type == "text" || c.Type == tools.TypeJSON {
			parts[i] = c.Text
		} else {
			parts[i] = msgNonText
		}
	}
	return strings.Join(parts, "\n")
}

// settle accounts one awaited call (docs/protocol.md, Budgets) and answers
// it; after a published answer the marker goes, then the shim is rung.
func (s *sweeper) settle(c claim, o outcome) {
	stats := s.stats
	ok, text := false, o.text
	switch {
	case o.ok:
		// The script receives (and is charged for) valid UTF-8.
		text = strings.ToValidUTF8(text, "\uFFFD")
		size, remaining := int64(len(text)), s.cfg.MaxResultBytes-stats.Bytes
		if size > remaining {
			text = msgBudget(size, remaining, s.cfg.MaxResultBytes)
			stats.Errors++
		} else {
			ok = true
			stats.Bytes += size
			stats.useTool(c.tool)
			if o.untrusted {
				stats.Untrusted = true
			}
		}
	case o.blocked:
		stats.Denied++
	default:
		stats.Errors++
		// The script holds the message as its ToolError.
		if o.untrusted {
			stats.Untrusted = true
		}
	}
	if s.publish(c.id, ok, ok && o.json, text) {
		// The ring first: the script's wait ends with the answer, and the
		// marker's unlink is bookkeeping the sweep finishes meanwhile,
		// before it settles.
		s.cfg.Bells.RingFor(c.id)
		_ = s.remove(markerName(c.id))
		reportRoundTrip(&s.cfg, c, ok, o.blocked)
	} else {
		s.unanswered++ // its marker stays for recovery
	}
}
