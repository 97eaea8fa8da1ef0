package shimpy

import _ "embed"

// RunnerName is the file name a session kernel stages the runner under,
// next to the unconfigured exec_tools module. The runner
// speaks kernel protocol version ProtocolVersion (1).
const RunnerName = "runner.py"

//go:embed runner.py
var runnerSource string

// Runner returns the session-kernel runner program: the python a
// persistent python3 runs with -u. It reads NDJSON requests on fd 0 and
// writes frames on a private control descriptor made from the fd 1 it was
// started with (docs/protocol.md, Part 2). The text is fixed at build time.
func Runner() string { return runnerSource }
