// Command execute-code runs python3 scripts that call tools through the
// execute_code bridge: `run` executes one script and prints what the model
// would receive, `config` prints the resolved configuration.
//
// The command owns flag parsing, exit statuses and the shape of what it
// prints; all behaviour lives in the executecode package.
package main
