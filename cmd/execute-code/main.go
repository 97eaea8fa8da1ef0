package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses: 0 when the script ran and exited 0, 1 when it ran and
// failed, 2 for a usage, configuration or tool error before any code ran.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

const usage = `usage:
  execute-code run [--mode per_call|session] [--config FILE] [--root DIR]
                   [--timeout-ms N] [--tools read,grep,...] [--approve ask|allow|deny]
                   [--json] [FILE|-]
  execute-code serve [--mode per_call|session] [--config FILE] [--root DIR] [--tools LIST]
                     [--metrics-addr 127.0.0.1:PORT]
                     [--cluster --listen ADDR --ca F --cert F --key F --local-capacity N]
  execute-code mcp [--mode per_call|session] [--config FILE] [--root DIR] [--tools LIST]
                   [--approve ask|allow|deny]   (execute_code as an MCP server on stdio)
  execute-code snapshot [--config FILE]       (a fresh runtime's aggregate; with serve running use op "snapshot")
  execute-code config [--mode per_call|session] [--config FILE] [--root DIR] [--tools LIST]
  execute-code node --join ADDR [--listen ADDR] [--ca F --cert F --key F] [--capacity N]
                                              (a kernel node of a serve --cluster session node)
  execute-code node certs DIR [--names LIST]  (development certificates for kernel nodes)
  execute-code COMMAND -h                     (that command's flags)
`

func main() {
	// A CLI started with SIGINT ignored (a background job of a shell
	// script) keeps ignoring it: subscribing would turn the ignored signal
	// into a cancel of the run.
	sigs := []os.Signal{syscall.SIGTERM}
	if !signal.Ignored(os.Interrupt) {
		sigs = append(sigs, os.Interrupt)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdin, stdout, stderr)
	case "serve":
		return cmdServe(ctx, args[1:], stdin, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, args[1:], stdin, stdout, stderr)
	case "config":
		return cmdConfig(args[1:], stdout, stderr)
	case "snapshot":
		return cmdSnapshot(args[1:], stdout, stderr)
	case "node":
		return cmdNode(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "execute-code: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}
