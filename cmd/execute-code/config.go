package main

import (
	"fmt"
	"io"
)

func cmdConfig(args []string, stdout, stderr io.Writer) int {
	var c common
	fs := newFlagSet("config")
	c.register(fs)
	if err := c.parse(fs, args, stdout); err != nil {
		return exitFor(err, func(err error) int { return usageError(stderr, err) })
	}
	cfg, err := c.load(warnLogger(stderr))
	if err != nil {
		return usageError(stderr, err)
	}
	fmt.Fprint(stdout, cfg.TOML())
	return exitOK
}
