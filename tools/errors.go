package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// toolError carries a message written for the script (no host paths) and
// the sentinel callers branch on. Wrapping with fmt.Errorf("%w") would put
// the sentinel's own text into the message, which reads badly in a
// ToolError; this keeps the text and the classification apart.
type toolError struct {
	kind  error
	msg   string
	cause error
}

func (e *toolError) Error() string { return e.msg }

func (e *toolError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

func newError(kind error, format string, args ...any) error {
	return &toolError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func badParam(format string, args ...any) error {
	return newError(ErrBadParam, format, args...)
}

// osReason is the bare reason of a filesystem error: *fs.PathError and
// friends embed the absolute host path, which must never reach a script.
func osReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	return err.Error()
}

// fsError turns an error from opening or reading shown into a script-facing
// error: missing paths become ErrNotFound, anything else keeps its errno
// (for errors.Is) without the host path.
func fsError(shown string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
		return &toolError{kind: ErrNotFound, msg: "no such file or directory: " + shown, cause: err}
	}
	return &toolError{msg: fmt.Sprintf("%s: %s", shown, osReason(err)), cause: err}
}
