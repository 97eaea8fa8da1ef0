package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/internal/cluster/certs"
)

const nodeUsage = `usage:
  execute-code node --join ADDR [--listen ADDR] [--ca F --cert F --key F] [--capacity N] [flags]
      runs a kernel node: the session node at --join places session kernels
      on it over mutual TLS; runs until SIGINT or SIGTERM (execute-code node
      --help lists every flag; the [cluster] table of --config sets them too)
  execute-code node --etcd HOST:PORT,... --listen ADDR [--ca F --cert F --key F] [flags]
      the same, registered in etcd: every session node given the same
      --etcd (serve --cluster --etcd) places kernels on it; --join is then
      optional, and --listen must be the address peers reach it at
  execute-code node certs DIR [--names session,node1,...]
      writes a development CA and one certificate per name into DIR
      (default names: session,node1,node2,node3); see README.md, Certificates
`

// cmdNode is the kernel node's command (docs/cluster.md): it runs a node
// until ctx ends (SIGINT, SIGTERM). Its subcommand certs writes
// development certificates.
func cmdNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, nodeUsage)
		return exitUsage
	}
	switch args[0] {
	case "certs":
		return cmdNodeCerts(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		// Both forms, then the flags of the node itself.
		fmt.Fprint(stdout, nodeUsage+"\n")
		fs, _, _ := nodeFlags()
		printHelp(fs, stdout)
		return exitOK
	}
	if !strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "execute-code node: unknown subcommand %q\n%s", args[0], nodeUsage)
		return exitUsage
	}
	return runNode(ctx, args, stdout, stderr)
}

// nodeFlags is the node's flag set, with the common and cluster flags
// registered on it.
func nodeFlags() (*flag.FlagSet, *common, *clusterFlags) {
	var c common
	var cf clusterFlags
	fs := newFlagSet("node")
	c.register(fs)
	cf.register(fs, true)
	return fs, &c, &cf
}

// runNode runs a kernel node: a session-mode runtime whose kernels the
// session side at --join, or every session side reading its etcd record,
// places. It prints its address once it listens (and is registered).
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c, cf := nodeFlags()
	if err := c.parse(fs, args, stdout); err != nil {
		return exitFor(err, func(err error) int { return usageError(stderr, err) })
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fmt.Errorf("node takes no arguments, got %q", fs.Arg(0)))
	}
	cc, err := cf.load(fs, c.configFile, true)
	if err != nil {
		return usageError(stderr, err)
	}
	// A kernel node runs session kernels, whatever the file says.
	c.mode = string(config.Session)
	log := warnLogger(stderr)
	rt, err := newRuntime(*c, log, executecode.WithKernelNode(cc))
	if err != nil {
		return usageError(stderr, err)
	}
	addr, err := rt.ClusterAddress(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "execute-code node: %v\n", err)
		_ = rt.Close(context.Background())
		return exitFailed
	}
	var joins []string
	if cc.Join != "" {
		joins = append(joins, "joining "+cc.Join)
	}
	if cc.Etcd() {
		joins = append(joins, fmt.Sprintf("registered in etcd (%s) under %s", strings.Join(cc.EtcdEndpoints, ","), cc.EtcdPrefix))
	}
	fmt.Fprintf(stdout, "execute-code node: listening on %s, %s\n", addr, strings.Join(joins, ", "))
	<-ctx.Done()
	if err := rt.Close(context.Background()); err != nil {
		log.Warn().Err(err).Msg("execute-code node: shutdown")
	}
	return exitOK
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
