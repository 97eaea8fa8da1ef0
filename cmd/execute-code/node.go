package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/executecode/executecode/internal/cluster/certs"
)

const nodeUsage = `usage:
  execute-code node certs DIR [--names session,node1,...]
      writes a development CA and one certificate per name into DIR
      (default names: session,node1,node2,node3); see README.md, Certificates
`

// cmdNode is the kernel node's command (docs/cluster.md). Its subcommand
// certs writes development certificates.
func cmdNode(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, nodeUsage)
		return exitUsage
	}
	switch args[0] {
	case "certs":
		return cmdNodeCerts(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, nodeUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "execute-code node: unknown subcommand %q\n%s", args[0], nodeUsage)
	return exitUsage
}

func cmdNodeCerts(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("node certs")
	names := fs.String("names", strings.Join(certs.DefaultNames, ","), "")
	// The directory may come before or after the flag.
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, fmt.Errorf("node certs: %w", err))
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	} else if fs.NArg() > 0 || dir == "" {
		return usageError(stderr, errors.New("node certs: give exactly one DIR"))
	}
	var list []string
	for _, n := range strings.Split(*names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			list = append(list, n)
		}
	}
	if len(list) == 0 {
		return usageError(stderr, errors.New("node certs: --names is empty"))
	}
	files, err := certs.WriteDev(dir, list, time.Now())
	if err != nil {
		if errors.Is(err, certs.ErrBadName) || errors.Is(err, certs.ErrExists) {
			return usageError(stderr, fmt.Errorf("node certs: %w", err))
		}
		fmt.Fprintf(stderr, "execute-code: node certs: %v\n", err)
		return exitFailed
	}
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	return exitOK
}
