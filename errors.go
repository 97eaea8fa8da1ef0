package executecode

import (
	"errors"
	"strings"
)

// Errors returned before any code runs; callers branch with errors.Is.
// Error() is written for a Go caller's log; ModelText gives the tool's
// error text, which is what a model is shown.
var (
	ErrDisabled = &toolError{msg: "execute_code is disabled",
		model: "execute_code is disabled. Enable [runtime.tools.execute_code] in config."}
	ErrMissingScript = &toolError{msg: "missing required parameter: script",
		model: "Missing required parameter: script"}
	ErrBadReset  = errors.New("reset must be a boolean")
	ErrPython    = errors.New("python3 is not usable")
	ErrWorkspace = errors.New("execute_code could not create its private workspace")
	ErrClosed    = errors.New("execute_code runtime is closed")
	// ErrConfig reports a configuration New cannot honour; the message
	// names the key.
	ErrConfig = errors.New("invalid execute_code configuration")
	// ErrDetached reports a call or an attach through an Owner that was
	// detached: it no longer has a session, and running it isolated
	// instead would hide the caller's bug.
	ErrDetached = errors.New("execute_code owner is detached")
)

// toolError is a sentinel whose model-facing text differs from its Go one.
type toolError struct{ msg, model string }

func (e *toolError) Error() string     { return e.msg }
func (e *toolError) ModelText() string { return e.model }

// ModelText is the text a model is shown for err: the tool's own error
// text where it has one (the reference's wording, capitalised and
// punctuated for a reader, not a log), else err.Error(). Context wrapped
// around such an error is kept.
func ModelText(err error) string {
	if err == nil {
		return ""
	}
	var te *toolError
	if errors.As(err, &te) {
		return strings.Replace(err.Error(), te.msg, te.model, 1)
	}
	return err.Error()
}
