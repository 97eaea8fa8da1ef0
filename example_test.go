package executecode_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"
)

// Embedding the runtime: enable the tool, build a runtime over a tool
// root, run one script, read what the model is shown and the details, and
// close. README.md quotes this body (TestREADMEQuotesTheExample).
func Example() {
	cfg := config.Defaults() // or config.Load(config.Options{File: ..., Cwd: ...})
	cfg.Enabled = true       // the tool is off by default for an embedding host
	rt, err := executecode.New(cfg,
		executecode.WithRoot(".")) // tool root and the script's cwd
	if err != nil {
		log.Fatal(err) // a bad Config wraps executecode.ErrConfig and names the key
	}
	defer rt.Close(context.Background()) // cancels runs, waits for teardown

	_ = rt.Description() // the tool description the model is shown
	ctx := context.Background()
	res, err := rt.Execute(ctx, executecode.Call{
		Script: "notify('working')\nprint('a diagnostic')\ntext(str(6 * 7))",
		Notify: func(msg string) { fmt.Println("notify:", msg) },
	})
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// ctx ended the call; res still says what ran, for the model
	case err != nil:
		fmt.Println(executecode.ModelText(err)) // nothing ran: the tool error for the model
		return
	}
	fmt.Println(res.Text()) // the tool result the model is shown
	d := res.Details        // never nil
	if d.ExitCode != nil {  // nil when the run was stopped: d.KilledBy says why
		fmt.Println("exit code:", *d.ExitCode, "trust:", res.Trust, "text() blocks:", res.Blocks)
	}
	// Output:
	// notify: working
	// Script result (text()):
	// 42
	//
	// Diagnostics (stdout/stderr, not the result):
	// a diagnostic
	//
	// exit code: 0 trust: trusted text() blocks: [42]
}
