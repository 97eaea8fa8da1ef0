package wire

import (
	"fmt"
	"net"
	"strconv"
	"unicode/utf8"
)

// Bounds on what a peer may send, far above anything the runtime makes.
const (
	maxNameBytes = 256 // a tool name, a reason, an actor id
	maxTools     = 256
)

// MaxCapacity bounds the kernels one node may offer, in its hello and in
// its member record alike.
const MaxCapacity = 1 << 16

// CapacityProblem says what is wrong with a node's capacity c; "" for
// nothing.
func CapacityProblem(c int) string {
	if c < 1 || c > MaxCapacity {
		return fmt.Sprintf("capacity %d is not between 1 and %d", c, MaxCapacity)
	}
	return ""
}

// AddressProblem says what keeps a from being a node's address, host:port
// with a port it can listen on, written as a listener writes it; "" for
// nothing.
func AddressProblem(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return "is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "has no valid port"
	}
	return ""
}

// check verifies the fields a payload's kind requires, so that a handler
// never sees a PID without an address, a negative budget or a name that
// is not text.
func check(v any) error {
	switch m := v.(type) {
	case *NodeHello:
		if err := m.Node.check("node"); err != nil {
			return err
		}
		if !ValidIncarnation(m.Incarnation) {
			return malformed(BadIncarnation)
		}
		if p := CapacityProblem(m.Capacity); p != "" {
			return malformed(p)
		}
	case *NodeWelcome:
		if err := m.Directory.check("directory"); err != nil {
			return err
		}
		if !ValidIncarnation(m.Incarnation) {
			return malformed(BadIncarnation)
		}
	case *StartKernel:
		if m.Key == "" || len(m.Key) > maxNameBytes || !utf8.ValidString(m.Key) {
			return malformed("key is empty, too long or not text")
		}
		if err := m.Owner.check("owner"); err != nil {
			return err
		}
		if !utf8.ValidString(m.HelperSource) {
			return malformed("helper_source is not text")
		}
		if m.MaxQueuedCells < 0 || m.MaxOutputBytes < 0 {
			return malformed("a bound is negative")
		}
		if err := m.Limits.check(); err != nil {
			return err
		}
	case *KernelStarted:
		return m.Kernel.check("kernel")
	case *StopKernel:
		return checkName("reason", m.Reason, true)
	case *RunCell:
		return m.check()
	case *CellResult:
		if !utf8.ValidString(m.Output) {
			return malformed("output is not text")
		}
		if m.Stats.Calls < 0 || m.Stats.Denied < 0 || m.Stats.Errors < 0 || m.Stats.Bytes < 0 || m.Stats.Notified < 0 {
			return malformed("a stats figure is negative")
		}
		if err := checkName("reason", m.Reason, true); err != nil {
			return err
		}
		return checkName("killed_by", m.KilledBy, true)
	case *CancelCell:
	case *Notify:
		if !utf8.ValidString(m.Message) {
			return malformed("message is not text")
		}
	case *ToolCall:
		if m.ID < 0 {
			return malformed("id is negative")
		}
		if err := checkName("tool", m.Tool, false); err != nil {
			return err
		}
		return checkName("approval_id", m.ApprovalID, true)
	case *ToolAnswer:
		if !utf8.ValidString(m.Text) {
			return malformed("text is not text")
		}
	case *Refused:
		return checkName("reason", m.Reason, false)
	}
	return nil
}

func (m *RunCell) check() error {
	if !utf8.ValidString(m.Code) {
		return malformed("code is not text")
	}
	if err := m.Bridge.check("bridge"); err != nil {
		return err
	}
	if m.TimeoutMS <= 0 {
		return malformed("timeout_ms must be positive")
	}
	if m.DeadlineUnixMS < 0 || m.CPUBudgetMS < 0 || m.MaxCalls < 0 || m.MaxResultBytes < 0 ||
		m.MaxParallel < 0 || m.MaxTextBytes < 0 {
		return malformed("a bound is negative")
	}
	if len(m.Tools) > maxTools {
		return malformed(fmt.Sprintf("more than %d tools", maxTools))
	}
	for _, t := range m.Tools {
		if err := checkName("tool", t, false); err != nil {
			return err
		}
	}
	for _, list := range [][]string{m.Policy.Allow, m.Policy.Deny, m.Policy.RequireApproval} {
		if len(list) > maxTools {
			return malformed(fmt.Sprintf("a policy list has more than %d names", maxTools))
		}
		for _, t := range list {
			if err := checkName("policy tool", t, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l Limits) check() error {
	if l.CPUSeconds < 0 || l.MemoryMB < 0 || l.FsizeMB < 0 || l.NProc < 0 {
		return malformed("a limit is negative")
	}
	return nil
}

// check: a PID names a host:port and an actor id.
func (p PID) check(field string) error {
	if problem := AddressProblem(p.Address); problem != "" {
		return malformed(field + ".address " + problem)
	}
	return checkName(field+".id", p.ID, false)
}

// checkName: a short single-line text, empty only where allowed.
func checkName(field, s string, emptyOK bool) error {
	if s == "" {
		if emptyOK {
			return nil
		}
		return malformed(field + " is empty")
	}
	if len(s) > maxNameBytes || !utf8.ValidString(s) {
		return malformed(field + " is too long or not text")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return malformed(field + " has a control character")
		}
	}
	return nil
}

func malformed(what string) error { return fmt.Errorf("%w: %s", ErrMalformed, what) }
