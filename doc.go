// Package executecode is the embeddable runtime for programmatic tool
// calling: a model submits a python3 script, the script calls the host's
// tools through pre-imported helpers over a file-based bridge, and the
// text() blocks it emits are the result.
//
// The facade owns validation of a call, the choice of mode, staging of a
// per-call workspace, the wiring of interpreter, pump and output capture,
// and the assembly of the result the model sees (headlines, diagnostics,
// trust wrapping, host-path scrubbing), and the runtime's event pipeline:
// its own telemetry bus, which feeds the lifecycle journal, the Prometheus
// metrics and the host's bus, and the snapshot read through the introspect
// actor. It calls config, privatetmp, shimpy, pump, kernelworker, actors,
// registry, approval, introspect, tools and telemetry; it never reads or writes
// bridge files itself (the pump does) and never starts a process except
// through internal/proc, directly for a per-call run or through
// kernelworker. With sandbox = "landlock" it gives every interpreter its
// confinement (sandbox.go: the read set, the tool root, the one
// workspace or kernel home it may write) and fails closed with
// ErrSandbox when one cannot be applied.
//
// What an embedder uses: this package (New, its options, Execute and
// ExecuteParams, Attach, AttachCoOwner and Detach, ModelText, Snapshot, Metrics, Lifecycle,
// ResolveApproval, Close), config (loading and the Config value), tools
// (the Tool interface and Result, for host-supplied helpers), telemetry
// (the Bus and the typed events a host subscribes to) and, from approval,
// the Approver half (Approver, ApproverFunc, Request, Decision). Every other
// package (actors, registry, kernelworker, pump, shimpy, privatetmp,
// introspect, the approval broker and everything under internal/) is the
// runtime's own machinery: its exported names serve sibling packages and
// carry no compatibility promise.
package executecode
