// Package wire is what crosses between nodes: one generated protobuf
// Envelope whose payload is the JSON of one of the structs below, named
// by its Kind (docs/cluster.md, The envelope). A single stable wire type
// means a message kind one node does not know is refused by Decode, never
// an unknown protobuf type the receiving node cannot decode.
//
// Everything here decodes bytes from a peer: Decode bounds the payload,
// refuses unknown kinds, unknown fields and trailing data, and checks the
// fields each kind requires, so a handler sees only well-formed payloads.
//
// It is the runtime's own machinery: its exported names serve sibling
// packages and carry no compatibility promise beyond the wire format.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/executecode/executecode/internal/jsonerr"
)

// MaxPayloadBytes bounds one envelope's payload. A cell's code, output and
// text blocks are already capped far below it by the runtime's own limits;
// the bound is what a peer cannot exceed whatever it claims.
const MaxPayloadBytes = 16 << 20

// Kind names an envelope's payload type.
type Kind string

// The kinds, by direction. "node" is a kernel node, "session" the side
// that keeps the registry, approvals, budgets and the claim ledger.
const (
	// KindNodeHello: node → session's directory, answered KindNodeWelcome.
	KindNodeHello   Kind = "node.hello"
	KindNodeWelcome Kind = "node.welcome"
	// KindStartKernel: session → node's kernelhost, answered
	// KindKernelStarted or KindRefused.
	KindStartKernel   Kind = "kernel.start"
	KindKernelStarted Kind = "kernel.started"
	// KindStopKernel: session → node's kernel; the kernel's end is seen by
	// watching it.
	KindStopKernel Kind = "kernel.stop"
	// KindRunCell: session → node's kernel, answered KindCellResult.
	KindRunCell    Kind = "cell.run"
	KindCellResult Kind = "cell.result"
	// KindCancelCell: session → node's kernel, for the cell of its Seq.
	KindCancelCell Kind = "cell.cancel"
	// KindNotify: node → session's cell bridge, one notify() message.
	KindNotify Kind = "cell.notify"
	// KindToolCall: node → session's cell bridge, answered KindToolAnswer.
	KindToolCall   Kind = "tool.call"
	KindToolAnswer Kind = "tool.answer"
	// KindRefused answers any request that was not carried out, naming why.
	KindRefused Kind = "refused"
)

// Errors Decode and Encode wrap; callers branch on them with errors.Is.
var (
	ErrUnknownKind      = errors.New("unknown message kind")
	ErrMalformed        = errors.New("malformed message")
	ErrPayloadTooLarge  = errors.New("payload too large")
	ErrWrongPayloadType = errors.New("payload type does not match kind")
)

// PID is an actor's address on the wire: the node's host:port and the
// actor's id there.
type PID struct {
	Address string `json:"address"`
	ID      string `json:"id"`
}

// Limits are a kernel's rlimits (the runtime's proc.Limits).
type Limits struct {
	CPUSeconds       int  `json:"cpu_seconds,omitempty"`
	MemoryMB         int  `json:"memory_mb,omitempty"`
	FsizeMB          int  `json:"fsize_mb,omitempty"`
	NProc            int  `json:"nproc,omitempty"`
	CPUHardUnlimited bool `json:"cpu_hard_unlimited,omitempty"`
}

// NodeHello is a kernel node announcing itself to a session node.
type NodeHello struct {
	// Node is the kernelhost's PID; Incarnation is the node process's own
	// (a restarted node on the same address is a new node).
	Node        PID    `json:"node"`
	Incarnation string `json:"incarnation"`
	// Capacity is how many kernels the node takes.
	Capacity int `json:"capacity"`
}

// NodeWelcome is the session node's answer: the PID the node watches, so
// that the session node's death reaps its kernels.
type NodeWelcome struct {
	Directory   PID    `json:"directory"`
	Incarnation string `json:"incarnation"`
}

// StartKernel asks a node for a kernel. Key is the registry key's digest,
// opaque to the node and never an identity; Owner is the session-side
// actor that holds the kernel, which the node watches.
type StartKernel struct {
	Key            string `json:"key"`
	Generation     uint64 `json:"generation"`
	Owner          PID    `json:"owner"`
	HelperSource   string `json:"helper_source"`
	MaxQueuedCells int    `json:"max_queued_cells"`
	MaxOutputBytes int    `json:"max_output_bytes"`
	Limits         Limits `json:"limits"`
}

// KernelStarted is the node's kernel, named with the envelope's
// incarnation so a stale PID cannot reach a later kernel.
type KernelStarted struct {
	Kernel PID `json:"kernel"`
}

// StopKernel ends a kernel gracefully (kernelworker.Stop).
type StopKernel struct {
	Reason string `json:"reason"`
}

// Policy is the run's tool policy (tools.Policy), which the node applies
// at claim time and the session side applies again.
type Policy struct {
	Allow           []string `json:"allow,omitempty"`
	Deny            []string `json:"deny,omitempty"`
	RequireApproval []string `json:"require_approval,omitempty"`
}

// RunCell is one cell for a node's kernel. Bridge is the session-side
// actor that runs the cell's helper calls and takes its notify()s.
type RunCell struct {
	Code           string `json:"code"`
	Bridge         PID    `json:"bridge"`
	TimeoutMS      int64  `json:"timeout_ms"`
	DeadlineUnixMS int64  `json:"deadline_unix_ms"`
	CPUBudgetMS    int64  `json:"cpu_budget_ms,omitempty"`
	// Tools are the helpers the cell may call, by name.
	Tools          []string `json:"tools"`
	Policy         Policy   `json:"policy"`
	MaxCalls       int      `json:"max_calls"`
	MaxResultBytes int64    `json:"max_result_bytes"`
	MaxParallel    int      `json:"max_parallel"`
	MaxTextBytes   int      `json:"max_text_bytes"`
}

// Exception is what a cell raised (kernelworker.Exception).
type Exception struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// Exit is the interpreter's exit when it ended under a cell.
type Exit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
}

// Stats is a cell's helper-call accounting as the node's pump kept it.
type Stats struct {
	Calls          int      `json:"calls"`
	Denied         int      `json:"denied"`
	Errors         int      `json:"errors"`
	Bytes          int64    `json:"bytes"`
	ToolsUsed      []string `json:"tools_used,omitempty"`
	Notified       int      `json:"notified"`
	AccountingLoss bool     `json:"accounting_loss,omitempty"`
	Untrusted      bool     `json:"untrusted,omitempty"`
	// Lost says the node could not drain its pump: the figures are a
	// lower bound.
	Lost bool `json:"lost,omitempty"`
}

// CellResult is how a node's cell ended, already scrubbed of the node's
// paths and the cell's token.
type CellResult struct {
	Reason            string     `json:"reason,omitempty"`
	RequestID         string     `json:"request_id,omitempty"`
	Output            string     `json:"output"`
	OutputTruncated   bool       `json:"output_truncated,omitempty"`
	KilledBy          string     `json:"killed_by,omitempty"`
	StateRetained     bool       `json:"state_retained"`
	Exception         *Exception `json:"exception,omitempty"`
	Exit              *Exit      `json:"exit,omitempty"`
	DroppedLateOutput int        `json:"dropped_late_output,omitempty"`
	Blocks            []string   `json:"blocks,omitempty"`
	Stats             Stats      `json:"stats"`
}

// CancelCell cancels the cell whose RunCell had the envelope's Seq.
type CancelCell struct{}

// Notify is one notify() message of a cell.
type Notify struct {
	Message string `json:"message"`
}

// ToolCall is one claimed helper call (pump.Call): ID is the script's
// request id, and the envelope's Seq pairs the call with its ToolAnswer.
// The session side believes only ID, Tool and Params; ApprovalID and Gated
// are the node's claim, for the logs (docs/cluster.md, The gate).
type ToolCall struct {
	ID         int64          `json:"id"`
	Tool       string         `json:"tool"`
	Params     map[string]any `json:"params"`
	ApprovalID string         `json:"approval_id"`
	Gated      bool           `json:"gated,omitempty"`
}

// ToolAnswer is its answer (pump.Answer).
type ToolAnswer struct {
	OK        bool   `json:"ok"`
	Text      string `json:"text"`
	JSON      bool   `json:"json,omitempty"`
	Untrusted bool   `json:"untrusted,omitempty"`
	Blocked   bool   `json:"blocked,omitempty"`
}

// Refused says a request was not carried out; Reason names why, in words
// meant for an operator's log (never secrets: it travels to the peer).
type Refused struct {
	Reason string `json:"reason"`
}

// payloadOf is each kind's payload type, as a constructor.
var payloadOf = map[Kind]func() any{
	KindNodeHello:     func() any { return new(NodeHello) },
	KindNodeWelcome:   func() any { return new(NodeWelcome) },
	KindStartKernel:   func() any { return new(StartKernel) },
	KindKernelStarted: func() any { return new(KernelStarted) },
	KindStopKernel:    func() any { return new(StopKernel) },
	KindRunCell:       func() any { return new(RunCell) },
	KindCellResult:    func() any { return new(CellResult) },
	KindCancelCell:    func() any { return new(CancelCell) },
	KindNotify:        func() any { return new(Notify) },
	KindToolCall:      func() any { return new(ToolCall) },
	KindToolAnswer:    func() any { return new(ToolAnswer) },
	KindRefused:       func() any { return new(Refused) },
}

// kindOf is the inverse of payloadOf, for Encode.
func kindOf(v any) (Kind, bool) {
	switch v.(type) {
	case *NodeHello:
		return KindNodeHello, true
	case *NodeWelcome:
		return KindNodeWelcome, true
	case *StartKernel:
		return KindStartKernel, true
	case *KernelStarted:
		return KindKernelStarted, true
	case *StopKernel:
		return KindStopKernel, true
	case *RunCell:
		return KindRunCell, true
	case *CellResult:
		return KindCellResult, true
	case *CancelCell:
		return KindCancelCell, true
	case *Notify:
		return KindNotify, true
	case *ToolCall:
		return KindToolCall, true
	case *ToolAnswer:
		return KindToolAnswer, true
	case *Refused:
		return KindRefused, true
	}
	return "", false
}

// Encode wraps payload (a pointer to one of this package's structs) in an
// envelope for incarnation, with seq.
func Encode(payload any, incarnation string, seq uint64) (*Envelope, error) {
	kind, ok := kindOf(payload)
	if !ok {
		return nil, fmt.Errorf("encode %T: %w", payload, ErrWrongPayloadType)
	}
	if err := check(payload); err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	if len(b) > MaxPayloadBytes {
		return nil, fmt.Errorf("encode %s: %w: %d bytes (at most %d)", kind, ErrPayloadTooLarge, len(b), MaxPayloadBytes)
	}
	return &Envelope{Kind: string(kind), Incarnation: incarnation, Seq: seq, Payload: b}, nil
}

// Decode is the envelope's payload, a pointer to the struct of its kind,
// checked. The error names what is wrong and never quotes the payload.
func Decode(env *Envelope) (any, error) {
	if env == nil {
		return nil, fmt.Errorf("%w: no envelope", ErrMalformed)
	}
	kind := Kind(env.GetKind())
	mk, ok := payloadOf[kind]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKind, printable(env.GetKind()))
	}
	if len(env.GetPayload()) > MaxPayloadBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes (at most %d)", kind, ErrPayloadTooLarge, len(env.GetPayload()), MaxPayloadBytes)
	}
	if !ValidIncarnation(env.GetIncarnation()) {
		return nil, fmt.Errorf("%s: %w: %s", kind, ErrMalformed, BadIncarnation)
	}
	v := mk()
	if problem := jsonerr.DecodeStrict(env.GetPayload(), v, "payload"); problem != "" {
		return nil, fmt.Errorf("%s: %w: %s", kind, ErrMalformed, problem)
	}
	if err := check(v); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return v, nil
}

var incarnationRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidIncarnation says whether s may name an incarnation: every message
// is for exactly one.
func ValidIncarnation(s string) bool { return incarnationRe.MatchString(s) }

// BadIncarnation is what is wrong with a name ValidIncarnation refuses.
const BadIncarnation = "incarnation is not 1 to 64 letters, digits, '-' or '_'"

// printable bounds and cleans a peer's string for an error message.
func printable(s string) string {
	const limit = 64
	out := make([]rune, 0, min(len(s), limit))
	for _, r := range s {
		if len(out) == limit {
			out = append(out, '…')
			break
		}
		if r < 0x20 || r == 0x7f || r == '\ufffd' {
			r = '?'
		}
		out = append(out, r)
	}
	return string(out)
}
