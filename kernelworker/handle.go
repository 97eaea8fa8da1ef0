package kernelworker

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/executecode/executecode/internal/proc"
)

// Cell is one cell as a caller submits it through a Client; each field
// means what the Execute field of the same name means.
type Cell struct {
	Code      string
	Cwd       string
	Bridge    *Bridge
	Scrub     *proc.Scrubber
	Timeout   time.Duration
	Deadline  time.Time
	CPUBudget time.Duration
}

// Client is the handle callers hold on a running worker actor: they run
// cells through it and never build the worker's messages. The zero Client
// has no worker.
type Client struct {
	root *actor.RootContext
	pid  *actor.PID
}

// NewClient is the handle of the worker actor pid.
func NewClient(root *actor.RootContext, pid *actor.PID) Client {
	return Client{root: root, pid: pid}
}

// PID is the worker's actor, for its supervisors and the registry, which
// watch it.
func (c Client) PID() *actor.PID { return c.pid }

// Execute queues cell on the worker and returns the channel its one
// CellResult arrives on. ctx is the cell's caller: when it is done the
// cell is abandoned (a queued cell leaves the queue, an active one is
// cancelled and its kernel discarded). Execute never blocks; a worker
// that is gone never answers, so callers bound their wait, and a Client
// without a worker answers at once with ReasonInvalidRequest.
func (c Client) Execute(ctx context.Context, cell Cell) <-chan CellResult {
	reply := make(chan CellResult, 1)
	if c.root == nil || c.pid == nil {
		reply <- CellResult{Reason: ReasonInvalidRequest}
		return reply
	}
	c.root.Send(c.pid, &Execute{
		Ctx: ctx, Code: cell.Code, Cwd: cell.Cwd, Bridge: cell.Bridge, Scrub: cell.Scrub,
		Timeout: cell.Timeout, Deadline: cell.Deadline, CPUBudget: cell.CPUBudget, Reply: reply,
	})
	return reply
}
