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
	if err := c.parse(fs, args, stdout); err != nil {
		return exitFor(err, func(err error) int { return usageError(stderr, err) })
	}
	rt, err := newRuntime(c, warnLogger(stderr))
	if err != nil {
		return usageError(stderr, err)
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
