package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/rs/zerolog"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := common{oneCall: true}
	var timeoutMS, approve string
	var asJSON bool
	fs := newFlagSet("run")
	c.register(fs)
	fs.StringVar(&timeoutMS, "timeout-ms", "", "the call's timeout_ms (clamped to the configured timeout_ms)")
	fs.StringVar(&approve, "approve", "", "answer to approval prompts: ask, allow or deny")
	fs.BoolVar(&asJSON, "json", false, "print the tool result as JSON")
	fail := func(err error) int {
		if asJSON {
			_ = json.NewEncoder(stdout).Encode(map[string]string{"error": executecode.ModelText(err)})
		} else {
			fmt.Fprintf(stderr, "execute-code: %s\n", executecode.ModelText(err))
		}
		return exitUsage
	}
	if err := c.parse(fs, args, stdout); err != nil {
		return exitFor(err, fail)
	}
	timeout := 0
	if timeoutMS != "" {
		n, err := strconv.Atoi(timeoutMS)
		if err != nil {
			return fail(fmt.Errorf("--timeout-ms: %q is not an integer", timeoutMS))
		}
		timeout = n
	}
	approver, err := approverFor(approve)
	if err != nil {
		return fail(err)
	}
	if fs.NArg() > 1 {
		return fail(fmt.Errorf("run takes one script (FILE or -), got %d arguments", fs.NArg()))
	}
	script, err := readScript(fs.Arg(0), stdin)
	if err != nil {
		return fail(err)
	}

	log := warnLogger(stderr)
	rt, err := newRuntime(c, log, executecode.WithApprover(approver))
	if err != nil {
		return fail(err)
	}
	defer rt.Close(context.Background())

	params := map[string]any{"script": script}
	if timeout != 0 {
		params["timeout_ms"] = timeout
	}
	notify := func(msg string) { fmt.Fprintf(stderr, "notify: %s\n", msg) }
	var owner *executecode.Owner
	if rt.Config().KernelMode == config.Session {
		// A throwaway session: one cell on its own kernel, then detach.
		if owner, err = rt.Attach(ctx, executecode.Scope{SessionID: "run-" + randomID(), AgentID: "cli"}); err != nil {
			return fail(err)
		}
		defer owner.Detach(context.Background())
	}
	res, err := rt.ExecuteParams(ctx, params, notify, owner)
	if err != nil && !stoppedByCtx(err) {
		return fail(err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(res)
	} else {
		fmt.Fprintln(stdout, res.Text())
		// The text names the spill by its placeholder, which only a later
		// call of this (now finished) runtime could read: the person at
		// the terminal gets the file itself.
		if p := res.Details.FullOutputPath; p != "" {
			fmt.Fprintf(stderr, "execute-code: full output saved to %s\n", p)
		}
	}
	return runStatus(res)
}

// stoppedByCtx: ctx ended the call (a signal, say); its Result is still
// the answer, worded for the model.
func stoppedByCtx(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// runStatus is 0 for a script that ran and exited 0, else 1.
func runStatus(res executecode.Result) int {
	if !res.Succeeded() {
		return exitFailed
	}
	return exitOK
}

func readScript(name string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	switch name {
	case "", "-":
		b, err = io.ReadAll(stdin)
	default:
		b, err = os.ReadFile(name)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if err != nil {
		return "", fmt.Errorf("script %q: %w", name, err)
	}
	return string(b), nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newRuntime loads the configuration and builds the runtime the CLI runs:
// enabled unless the configuration said no, with the built-in tools rooted
// at --root.
func newRuntime(c common, log zerolog.Logger, extra ...executecode.Option) (*executecode.Runtime, error) {
	cfg, err := c.load(log)
	if err != nil {
		return nil, err
	}
	// Running the CLI is consent: enable unless the config said no.
	if !cfg.EnabledExplicit {
		cfg.Enabled = true
	}
	opts := []executecode.Option{executecode.WithLogger(log), executecode.WithPrivateNetworks()}
	if c.root != "" {
		opts = append(opts, executecode.WithRoot(c.root))
	}
	if c.sampleHostTool {
		opts = append(opts, sampleHostTool())
	}
	opts = append(opts, c.mcp.options()...)
	rt, err := executecode.New(cfg, append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	if err := c.mcp.checkTools(c.tools, rt.Helpers()); err != nil {
		_ = rt.Close(context.Background())
		return nil, err
	}
	return rt, nil
}
