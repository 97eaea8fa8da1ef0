// Command hostinit embeds the runtime the way an application would, with
// a dependency (initpkg) whose init has side effects. "run" executes a
// per-call script and a session cell and closes cleanly; "die" runs a
// session cell and a per-call script, says "ready" and waits to be killed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/config"

	_ "example.com/hostinit/initpkg"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: hostinit run|die <root>")
	}
	ctx := context.Background()
	cfg := config.Defaults()
	cfg.Enabled = true
	perCall, err := executecode.New(cfg, executecode.WithRoot(args[1]))
	if err != nil {
		return err
	}
	cfg.KernelMode = config.Session
	session, err := executecode.New(cfg, executecode.WithRoot(args[1]))
	if err != nil {
		return err
	}
	owner, err := session.Attach(context.Background(), executecode.Scope{SessionID: "s1", AgentID: "main"})
	if err != nil {
		return err
	}
	results := map[string]executecode.Result{}
	if results["per_call"], err = perCall.Execute(ctx, executecode.Call{Script: "text('x')"}); err != nil {
		return err
	}
	if results["cell"], err = session.Execute(ctx, executecode.Call{Script: "text('y')", Owner: owner}); err != nil {
		return err
	}
	b, err := json.Marshal(results)
	if err != nil {
		return err
	}
	fmt.Println("results", string(b))
	if args[0] == "die" {
		fmt.Println("ready")
		time.Sleep(10 * time.Minute) // the test kills this host long before
		return nil
	}
	if err := owner.Detach(ctx); err != nil {
		return err
	}
	if err := session.Close(ctx); err != nil {
		return err
	}
	return perCall.Close(ctx)
}
