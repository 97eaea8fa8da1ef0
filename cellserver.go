package executecode

import (
	"context"
	"path/filepath"

	"github.com/executecode/executecode/internal/proc"

	"github.com/executecode/executecode/pump"
)

// cellServer is a session cell's pump server from its start to its stop,
// used alike by a local cell (session.go) and a kernel node's
// (cluster_node.go).
type cellServer struct {
	r        *Runtime
	srv      *pump.Server
	finished bool
}

// cellScrubber is a session cell's one scrubber: its bridge and token,
// the kernel's workspace kernelWS (where the runner and the helpers'
// __file__ live) and home, and the staging root. The worker applies it to
// the output as it streams and to the exception; the rest is rewritten
// in format.
func (r *Runtime) cellScrubber(ws workspace, kernelWS string) *proc.Scrubber {
	return newScrubber(r.scrubRoot(), ws.token, scrubTarget{ws.rpc, bridgeName},
		scrubTarget{ws.base, workspaceName}, scrubTarget{kernelWS, workspaceName},
		scrubTarget{filepath.Dir(kernelWS), workspaceName})
}

// finish ends the cell's helper calls and reads what the cell left: its
// stats in one exchange with the server's loop (pump.Server.Finish), and
// its text() blocks. An error means the stats are lost and flagged so.
func (c *cellServer) finish(ws workspace, maxTextBytes int) (pump.Stats, []string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), serverTimeout)
	defer cancel()
	stats, err := c.srv.Finish(ctx)
	// Only an answered Finish makes the stop's drain of notifications
	// moot; a server that did not answer is stopped on the cell's path.
	c.finished = err == nil
	return stats, pump.ReadTextBlocks(ws.rpc, ws.token, maxTextBytes, c.r.bridgeDenied), err
}

// stop ends the server; the caller defers it. Once finish has read the
// stats, nothing the stop does can change the cell's answer (it forwards
// no more notifications), so it runs off the cell's path, on a goroutine
// of the bridge work that Close waits for. An unfinished server (a cell
// ended by a panic) is stopped here, since its stop may still forward a
// notification to a caller that is waiting, as may one whose Finish
// failed.
func (c *cellServer) stop() {
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), serverTimeout)
		defer cancel()
		c.srv.Stop(ctx)
	}
	if !c.finished || !c.r.offPath(stop) {
		stop()
	}
}
