// Command execute-code runs python3 scripts that call tools through the
// execute_code bridge: `run` executes one script and prints what the model
// would receive, `serve` answers JSON lines on stdin (per-call runs and
// session kernels), `snapshot` prints the aggregate snapshot and `config`
// the resolved configuration.
//
// The command owns flag parsing, exit statuses, the serve protocol's line
// decoding (request.go: pure functions, fuzzed) and the shape of what it
// prints; all behaviour lives in the executecode package.
//
// It is a command, not a library: its flags, exit statuses, output and
// serve lines are its interface, and nothing in the package carries a
// compatibility promise for importers.
package main
