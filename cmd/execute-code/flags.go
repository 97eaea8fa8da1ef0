package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/executecode/executecode/config"
	"github.com/executecode/executecode/tools"
)

// errHelp is what parse returns for -h or --help: the command has printed
// its flags on stdout and exits 0.
var errHelp = errors.New("help requested")

// cliTools are the tool names the binary has compiled in; --tools may only
// narrow them.
var cliTools = tools.Allowlist

// common are the flags run, config (and later serve) share.
type common struct {
	mode, configFile, root, tools string
	sandbox                       string
	sampleHostTool                bool
	mcp                           mcpFlags
	// oneCall is set by run, which makes one call and exits: no
	// interpreter is kept warm for a next call that never comes.
	oneCall bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.mode, "mode", "", "kernel mode: per_call or session (default: the configured kernel_mode)")
	fs.StringVar(&c.configFile, "config", "", "TOML config file with a [runtime.tools.execute_code] table")
	fs.StringVar(&c.root, "root", "", "tool root and the script's working directory (default: the current directory)")
	fs.StringVar(&c.tools, "tools", "", "comma-separated helper subset, e.g. read,grep")
	fs.StringVar(&c.sandbox, "sandbox", "", "none, or landlock: each interpreter may write only its workspace, read only the tool root and its own files, and open no socket (default: the configured sandbox)")
	fs.BoolVar(&c.sampleHostTool, "sample-host-tool", false, "register the sample host tool wordcount(text), which answers a dict")
	c.mcp.register(fs.Func)
}

// parse reads args into fs (on which c is registered) and validates the
// common flags; the error is one line naming the bad flag. For -h or
// --help it prints the command's flags on stdout and returns errHelp.
func (c *common) parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(fs, stdout)
			return errHelp
		}
		return err
	}
	return c.validate()
}

// commandArgs are the positional arguments each command's help shows.
var commandArgs = map[string]string{"run": " [FILE|-]"}

func printHelp(fs *flag.FlagSet, stdout io.Writer) {
	fmt.Fprintf(stdout, "usage: execute-code %s [flags]%s\n\nflags:\n", fs.Name(), commandArgs[fs.Name()])
	fs.SetOutput(stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// exitFor gives the exit status of a parse error: 0 after help, else a
// usage error reported by report.
func exitFor(err error, report func(error) int) int {
	if errors.Is(err, errHelp) {
		return exitOK
	}
	return report(err)
}

// usageError reports a usage error on stderr and gives the usage exit status.
func usageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "execute-code: %v\n", err)
	return exitUsage
}

// validate checks flag values a config key would silently forgive: on the
// command line a typo is a usage error naming the flag.
func (c *common) validate() error {
	if c.mode != "" && c.mode != string(config.PerCall) && c.mode != string(config.Session) {
		return fmt.Errorf("--mode: %q is not per_call or session", c.mode)
	}
	if c.sandbox != "" && c.sandbox != config.SandboxNone && c.sandbox != config.SandboxLandlock {
		return fmt.Errorf("--sandbox: %q is not none or landlock", c.sandbox)
	}
	if err := c.mcp.parse(); err != nil {
		return err
	}
	if c.tools != "" {
		have := append(slices.Clone(cliTools), c.hostTools()...)
		for _, n := range strings.Split(c.tools, ",") {
			// An MCP server's names are checked once it has listed them.
			if n = strings.TrimSpace(n); !slices.Contains(have, n) && !c.mcpPrefixed(n) {
				return fmt.Errorf("--tools: %q is not a tool (have %s)", n, strings.Join(have, ", "))
			}
		}
	}
	if c.root != "" {
		fi, err := os.Stat(c.root)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("--root: %q is not a directory", c.root)
		}
	}
	return nil
}

// load resolves the configuration: flags > env > TOML > defaults.
func (c *common) load(log zerolog.Logger) (config.Config, error) {
	cwd := c.root
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	over := map[string]any{}
	if c.mode != "" {
		over["kernel_mode"] = c.mode
	}
	if c.tools != "" {
		over["tools"] = c.builtinTools()
	}
	if c.sandbox != "" {
		over["sandbox"] = c.sandbox
	}
	if c.oneCall {
		// Kept warm, an interpreter would start beside the script's own,
		// competing for the cores, only to be killed at exit.
		over[warmKey] = 0
	}
	return config.Load(config.Options{File: c.configFile, Cwd: cwd, Overrides: over, Logger: &log,
		HostTools: c.hostTools(), HostToolPrefixes: c.mcp.prefixes()})
}

// warmKey is the configuration key of the interpreters kept warm.
const warmKey = "warm_interpreters"

// newFlagSet returns a flag set whose errors are returned, not printed.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// warnLogger prints configuration warnings on stderr, one line each.
func warnLogger(w io.Writer) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}).Level(zerolog.WarnLevel)
}

// hostTools are the names of the host tools these flags register: what
// --tools and the configuration may name besides the built-ins.
func (c *common) hostTools() []string {
	if c.sampleHostTool {
		return []string{sampleSpec.Name}
	}
	return nil
}
