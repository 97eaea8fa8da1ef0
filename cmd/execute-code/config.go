package main

import (
	"fmt"
	"io"
)

func cmdConfig(args []string, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet("config")
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "execute-code: %v\n", flagError(err))
		return exitUsage
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "execute-code: %v\n", err)
		return exitUsage
	}
	cfg, err := c.load(warnLogger(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "execute-code: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(stdout, cfg.TOML())
	return exitOK
}
