package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// cmdSnapshot prints a fresh runtime's aggregate snapshot: the effective
// configuration with zero counts. A running `serve` answers op "snapshot".
func cmdSnapshot(args []string, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet("snapshot")
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "execute-code: %v\n", flagError(err))
		return exitUsage
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "execute-code: %v\n", err)
		return exitUsage
	}
	rt, err := newRuntime(c, warnLogger(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "execute-code: %v\n", err)
		return exitUsage
	}
	defer rt.Close(context.Background())
	snap, err := rt.Snapshot(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "execute-code: snapshot: %v\n", err)
		return exitFailed
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(snap)
	return exitOK
}
