package mcpserve

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/executecode/executecode/approval"
)

// run is one execute_code call in progress: its result once done, and
// the approvals it waits for, asked of the client through its request.
type run struct {
	id     string // the requestState a retry names
	ss     *mcp.ServerSession
	cancel context.CancelFunc
	done   chan struct{}
	res    *mcp.CallToolResult
	asks   chan *ask

	mu      sync.Mutex
	pending map[string]*ask
	// The request the run now answers: notify() goes to its token.
	reqCtx context.Context
	token  any
	n      int
}

// ask is one approval the run's client is asked for.
type ask struct {
	id     string
	params *mcp.ElicitParams
	answer chan approval.Decision // buffered: the answer never blocks
}

// follow makes req the request r reports progress to.
func (r *run) follow(ctx context.Context, req *mcp.CallToolRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqCtx, r.token = ctx, req.Params.GetProgressToken()
}

// more is the next approval already waiting, or nil.
func (r *run) more() *ask {
	select {
	case a := <-r.asks:
		return a
	default:
		return nil
	}
}

// answer hands the client's responses to the approvals waiting for them;
// an approval the retry left unanswered is denied, so no helper call
// waits on a prompt the client dropped.
func (r *run) answer(responses mcp.InputResponseMap) {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[string]*ask{}
	r.mu.Unlock()
	for id, a := range pending {
		res, _ := responses[id].(*mcp.ElicitResult)
		a.answer <- decisionOf(res)
	}
}

// ask puts an approval to the client and waits for its answer, or for
// ctx (the approval's own timeout) or the run to end, which deny it.
func (r *run) ask(ctx context.Context, params *mcp.ElicitParams) (approval.Decision, error) {
	a := &ask{id: approval.NewID(), params: params, answer: make(chan approval.Decision, 1)}
	select {
	case r.asks <- a:
	case <-ctx.Done():
		return approval.Deny, ctx.Err()
	case <-r.done:
		return approval.Deny, nil
	}
	select {
	case d := <-a.answer:
		return d, nil
	case <-ctx.Done():
		return approval.Deny, ctx.Err()
	}
}

// notify sends one notify() of the script to the client: as progress on
// the current request's token when it sent one, else as an info log
// message (which the SDK sends only at the log level the client asked
// for).
func (r *run) notify(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ss == nil || r.reqCtx == nil {
		return
	}
	if r.token == nil {
		_ = r.ss.Log(r.reqCtx, &mcp.LoggingMessageParams{Level: "info", Logger: "execute_code", Data: msg})
		return
	}
	// Progress must increase: the count of messages so far, in order.
	r.n++
	_ = r.ss.NotifyProgress(r.reqCtx, &mcp.ProgressNotificationParams{ProgressToken: r.token, Message: msg, Progress: float64(r.n)})
}
