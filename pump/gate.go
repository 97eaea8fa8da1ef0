package pump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/rs/zerolog"

	"github.com/executecode/executecode/approval"
	"github.com/executecode/executecode/tools"
)

// Call is one claimed helper call, as the pump hands it to its Gate: the
// request's id (from its file name), tool and params, the approval id
// allocated at its claim and whether the claim's policy gates it.
type Call struct {
	ID         int64
	Tool       string
	Params     map[string]any
	ApprovalID string
	Gated      bool
}

// Answer is a dispatched call's normalised outcome, before the result-byte
// budget is spent on it.
type Answer struct {
	OK bool
	// Text is the content when OK, else the error message.
	Text      string
	Untrusted bool
	// JSON says Text is one JSON document, which the shim decodes.
	JSON bool
	// Blocked says approval stopped the call: it is answered Text and
	// counted as a denial, not an error.
	Blocked bool
}

// Gate is what the pump dispatches a claimed, validated call to: it asks
// for the call's approval when the call is gated, runs the tool and
// normalises the outcome (docs/architecture.md, The gate). NewGate is the
// local one; a kernel node's pump has one that forwards each call to the
// session side, where a GuardedGate decides it again.
//
// Run must return one Answer; it may be called from many goroutines at
// once, and ctx ends with the sweep that claimed the call. A panic in Run
// is contained by the pump and answered as a tool panic is.
type Gate interface {
	Run(ctx context.Context, c Call) Answer
}

// Sender is a Gate that can hand a call on without waiting for its
// answer. The pump sends each wave's calls to it from the sweep, one
// after the other in claim order, before it awaits the first answer: a
// gate on another machine then receives them in claim order, and can
// settle them in that order as a local pump does (docs/cluster.md, Cell).
type Sender interface {
	Gate
	// Send hands c on and returns where its one answer arrives. It must
	// not wait for the call's outcome; ctx ends with the sweep.
	Send(ctx context.Context, c Call) <-chan Answer
}

// localGate is today's dispatch: approval through the broker, the tool,
// a contained panic, the outcome normalised.
type localGate struct {
	tools     map[string]tools.Tool
	approvals *approval.Broker
	ac        ApprovalContext
	log       *zerolog.Logger
}

// NewGate is the gate a local pump dispatches to, built from cfg's Tools,
// Approvals, ApprovalContext and Logger: a gated call first waits for the
// broker's decision under its approval id (a denied, cancelled, timed-out
// or failed approval is answered as such, blocked), then the tool runs
// with ctx, and a panic inside either becomes the call's error answer. A
// gated call without a broker is blocked as a failed approval: a gate
// fails closed. A tool missing from Tools is answered as not available.
func NewGate(cfg Config) Gate {
	cfg.Gate, cfg.gate = nil, nil
	return cfg.settled().gate
}

func (g *localGate) Run(ctx context.Context, c Call) (a Answer) {
	defer func() {
		// A Goexit recovers nothing and is left to the caller's guard
		// (runCall), which still answers the call.
		if r := recover(); r != nil {
			a = panicAnswer(g.log, c.Tool, c.ID, r)
		}
	}()
	if c.Gated {
		if g.approvals == nil {
			g.log.Warn().Str("tool", c.Tool).Int64("id", c.ID).Str("cause", "broker_unavailable").
				Msg("execute_code rpc approval failed")
			return Answer{Blocked: true, Text: msgApproval(phraseApprovalFailed, c.Tool)}
		}
		// Closed when this dispatch ends, however it ends: the watcher's
		// second cancel then runs strictly after anything this goroutine
		// could have registered.
		dispatchDone := make(chan struct{})
		defer close(dispatchDone)
		if blocked, approved := g.awaitApproval(ctx, c, dispatchDone); !approved {
			return blocked
		}
	}
	t := g.tools[c.Tool]
	if t == nil {
		return Answer{Text: msgUnavailable(c.Tool)}
	}
	res, err := t.Execute(ctx, c.Params)
	if err != nil {
		var ue *tools.UntrustedError
		return Answer{Text: err.Error(), Untrusted: errors.As(err, &ue)}
	}
	return resultAnswer(c.Tool, res)
}

// runCall runs c through gate and always delivers exactly one answer: a
// panic (or a Goexit) inside the gate becomes an error answer and never
// reaches the sweep. It may outlive an abandoned sweep; ctx is the
// sweep's, which ends when the sweep does.
func runCall(ctx context.Context, gate Gate, log *zerolog.Logger, tasks *taskGroup, c claim, out chan<- Answer) {
	defer tasks.done()
	var a Answer
	finished := false
	defer func() {
		if !finished {
			a = panicAnswer(log, c.tool, c.id, recover())
		}
		out <- a
	}()
	a = gate.Run(ctx, c.call())
	finished = true
}

// sendCall hands c to a Sender from the sweep: a panic inside Send is
// contained and becomes the call's answer, as a panic inside Run is.
func sendCall(ctx context.Context, gate Sender, log *zerolog.Logger, c claim) (ch <-chan Answer) {
	defer func() {
		if r := recover(); r != nil {
			failed := make(chan Answer, 1)
			failed <- panicAnswer(log, c.tool, c.id, r)
			ch = failed
		}
	}()
	return gate.Send(ctx, c.call())
}

// call is the claim as its gate sees it.
func (c claim) call() Call {
	return Call{ID: c.id, Tool: c.tool, Params: c.params, ApprovalID: c.approvalID, Gated: c.gated}
}

// awaitApproval asks the broker for the call's approval under its
// pre-allocated id (docs/protocol.md, Approvals). First it starts the
// watcher that cancels the prompt after the sweep ends and again after this
// dispatch ends, so no prompt outlives both. approved is false for every
// outcome but an approval; blocked is then the call's answer. A broker
// failure, a panic included, blocks the call: approval fails closed.
func (g *localGate) awaitApproval(ctx context.Context, c Call, dispatchDone <-chan struct{}) (blocked Answer, approved bool) {
	g.approvals.Watch(c.ApprovalID, ctx.Done(), dispatchDone)
	res, err := g.requestApproval(ctx, c)
	phrase := phraseApprovalDenied // deny, and a cancelled prompt
	switch {
	case err != nil:
		g.log.Warn().Str("tool", c.Tool).Int64("id", c.ID).Str("cause", approvalFailure(err)).
			Msg("execute_code rpc approval failed")
		phrase = phraseApprovalFailed
	case res.Approved:
		return Answer{}, true
	case res.TimedOut:
		phrase = phraseApprovalTimedOut
	}
	return Answer{Blocked: true, Text: msgApproval(phrase, c.Tool)}, false
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

func (g *localGate) requestApproval(ctx context.Context, c Call) (res approval.Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s", errApprovalPanic, typeName(r))
		}
	}()
	ac := g.ac
	return g.approvals.Request(ctx, approval.Request{
		ID:        c.ApprovalID,
		Tool:      c.Tool,
		Args:      c.Params,
		Rationale: "Tool execution: " + c.Tool,
		SessionID: ac.SessionID,
		AgentID:   ac.AgentID,
		Timeout:   ac.Timeout,
		Caller:    ac.Caller,
	})
}

// panicAnswer is the answer to call id of tool whose gate or tool
// panicked with r (nil for a Goexit), logged by the panic's type only.
func panicAnswer(log *zerolog.Logger, tool string, id int64, r any) Answer {
	log.Error().Str("tool", tool).Int64("id", id).Str("panic", typeName(r)).Msg("execute_code rpc tool panicked")
	return Answer{Text: panicMessage(r)}
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

// resultAnswer is a successful call's answer: a result of exactly one
// JSON block travels as JSON (the shim decodes it into a dict, list or
// scalar); a JSON block that does not parse is the tool's error, named.
func resultAnswer(tool string, res tools.Result) Answer {
	if len(res.Content) == 1 && res.Content[0].Type == tools.TypeJSON {
		if !json.Valid([]byte(res.Content[0].Text)) {
			return Answer{Text: msgInvalidJSON(tool)}
		}
		return Answer{OK: true, JSON: true, Text: res.Content[0].Text, Untrusted: res.Untrusted}
	}
	return Answer{OK: true, Text: contentText(res), Untrusted: res.Untrusted}
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
