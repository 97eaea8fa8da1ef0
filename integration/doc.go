// Package integration holds end-to-end tests and benchmarks of the runtime
// against a real python3: the facade, the CLI binary, hostile scripts
// speaking raw file-RPC, and leak checks (goroutines, processes, files in
// the private staging root) closing every test.
//
// It has no non-test code and must not be imported.
//
// Like every package but executecode, config, tools, telemetry and
// approval.Approver, it is the runtime's own machinery, with no
// compatibility promise.
package integration
