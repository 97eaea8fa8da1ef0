// Command execute-code runs python3 scripts that call tools through the
// execute_code bridge: `run` executes one script and prints what the model
// would receive, `serve` answers JSON lines on stdin (per-call runs and
// session kernels), `snapshot` prints the aggregate snapshot and `config`
// the resolved configuration.
//
// The command owns flag parsing, exit statuses, the serve protocol's line
// decoding (request.go: pure functions, fuzzed) and the shape of what it
// prints; all behaviour lives in the executecode package.
package main
