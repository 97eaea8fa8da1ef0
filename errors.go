package executecode

import "errors"

// Errors returned before any code runs. Their messages are the tool's error
// texts; callers branch with errors.Is.
var (
	ErrDisabled      = errors.New("execute_code is disabled. Enable [runtime.tools.execute_code] in config.")
	ErrMissingScript = errors.New("Missing required parameter: script")
	ErrBadReset      = errors.New("reset must be a boolean")
	ErrPython        = errors.New("python3 is not usable")
	ErrWorkspace     = errors.New("execute_code could not create its private workspace")
	ErrClosed        = errors.New("execute_code runtime is closed")
	// ErrConfig reports a configuration New cannot honour; the message
	// names the key.
	ErrConfig = errors.New("invalid execute_code configuration")
)
