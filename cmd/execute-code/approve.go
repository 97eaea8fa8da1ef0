package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/executecode/executecode/approval"
)

// approverFor turns `run --approve` into the runtime's Approver. The
// default is to ask when stdin is a terminal and to deny otherwise: a
// prompt nobody can see must not let a call through.
func approverFor(mode string) (approval.Approver, error) {
	if mode == "" {
		mode = "deny"
		if isTerminal(os.Stdin) {
			mode = "ask"
		}
	}
	switch mode {
	case "allow":
		return fixedDecision(approval.ApproveOnce), nil
	case "deny":
		return fixedDecision(approval.Deny), nil
	case "ask":
		return approval.ApproverFunc(askOnTerminal), nil
	}
	return nil, fmt.Errorf("--approve: %q is not ask, allow or deny", mode)
}

func fixedDecision(d approval.Decision) approval.Approver {
	return approval.ApproverFunc(func(context.Context, approval.Request) (approval.Decision, error) { return d, nil })
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// askOnTerminal prompts on the controlling terminal (stdin may be the
// script itself) until the user answers or the prompt ends.
func askOnTerminal(ctx context.Context, req approval.Request) (approval.Decision, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return approval.Deny, fmt.Errorf("no terminal to ask on: %w", err)
	}
	defer tty.Close()
	// Closing the terminal ends a read still waiting when the prompt is
	// cancelled or times out.
	stop := context.AfterFunc(ctx, func() { _ = tty.Close() })
	defer stop()
	args, _ := json.Marshal(req.Args)
	fmt.Fprintf(tty, "\nexecute-code: the script asks to run %s %s\n  (%s)\n  allow? [y]es once, [s]ession, [a]gent, [g]lobal, [N]o: ",
		req.Tool, args, req.Rationale)
	line, err := bufio.NewReader(tty).ReadString('\n')
	if err != nil {
		return approval.Deny, ctx.Err()
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return approval.ApproveOnce, nil
	case "s", "session":
		return approval.ApproveSession, nil
	case "a", "agent":
		return approval.ApproveAgent, nil
	case "g", "global":
		return approval.ApproveGlobal, nil
	}
	return approval.Deny, nil
}

// serveApprover announces a prompt on serve's output, labelled with the
// execute request it belongs to, and leaves the answer to the `approve`
// op (which resolves it through the broker) or to its timeout.
func serveApprover(out *lineWriter) approval.Approver {
	return approval.ApproverFunc(func(ctx context.Context, req approval.Request) (approval.Decision, error) {
		id, _ := req.Caller.(json.RawMessage)
		out.send(map[string]any{"id": idValue(id), "approval": map[string]any{
			"approval_id": req.ID, "tool": req.Tool, "args": req.Args, "rationale": req.Rationale,
		}})
		<-ctx.Done()
		return approval.Deny, ctx.Err()
	})
}
