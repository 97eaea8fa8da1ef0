package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/mcpserve"
)

// cmdMCP serves execute_code over MCP on stdin/stdout until the client
// closes its end or a signal arrives; then every kernel and interpreter
// is stopped before it returns.
func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var c common
	var approve string
	fs := newFlagSet("mcp")
	c.register(fs)
	fs.StringVar(&approve, "approve", "", "answer to approval prompts of clients without elicitation: ask, allow or deny (default: ask on a terminal, else deny)")
	if err := c.parse(fs, args, stdout); err != nil {
		return exitFor(err, func(err error) int { return usageError(stderr, err) })
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "execute-code: mcp takes no arguments, got %q\n", fs.Arg(0))
		return exitUsage
	}
	fallback, err := approverFor(approve)
	if err != nil {
		return usageError(stderr, err)
	}
	// A connection is a session: session mode unless asked otherwise, as
	// for serve.
	if c.mode == "" {
		c.mode = string(config.Session)
	}
	log := warnLogger(stderr)
	defer surviveSIGPIPE()()
	rt, err := newRuntime(c, log, executecode.WithApprover(mcpserve.Approver(fallback)))
	if err != nil {
		return usageError(stderr, err)
	}
	srv := mcpserve.New(rt, version())
	err = srv.Run(ctx, &mcp.IOTransport{Reader: closerOf(stdin), Writer: writeCloser{stdout}})
	srv.Close()
	if cerr := rt.Close(context.Background()); cerr != nil {
		log.Warn().Err(cerr).Msg("execute-code mcp: shutdown")
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		log.Warn().Err(err).Msg("execute-code mcp: connection")
	}
	return exitOK
}

// version is the module version the binary was built from, or "dev".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// closerOf gives the transport a Close that ends a read still waiting on
// stdin when the server stops first (a signal); a reader without one
// gets a no-op.
func closerOf(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// writeCloser keeps stdout open when the transport closes: the process
// owns it.
type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
