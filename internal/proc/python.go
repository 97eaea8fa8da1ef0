package proc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Sentinels for ResolvePython's errors, whose text is the tool error a
// caller sees, fixed word for word.
var (
	ErrPythonNotFound      = errors.New("python3 not found")
	ErrPythonNotExecutable = errors.New("python3 not executable")
)

const (
	msgNotOnPath = "python3 was not found on this host. execute_code requires python3; " +
		"install it or set [runtime.tools.execute_code] python_path."
	msgConfiguredMissing = "configured execute_code python_path not found: "
	msgConfiguredNotExec = "configured execute_code python_path is not an executable file: "
)

// probeTimeout bounds asking a version-manager shim for the interpreter it
// stands for.
const probeTimeout = 5 * time.Second

// pythonError carries the exact user-facing text while still matching its
// sentinel (and the underlying cause) with errors.Is.
type pythonError struct {
	msg   string
	kind  error
	cause error
}

func (e *pythonError) Error() string { return e.msg }

func (e *pythonError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// ResolvePython returns the interpreter to run. A configured path is checked
// (it must stat, following links, as a regular file with an execute bit) and
// returned unchanged. Otherwise $PATH is searched for python3, taking the
// first real interpreter: a regular executable file that does not start with
// "#!". Version-manager shims are shell scripts, and exec'ing one costs a
// shell and, under a sandbox, fails outright. If only scripts are found, the
// first is run once to print sys.executable, and that is used when it is a
// real interpreter.
func ResolvePython(configured string) (string, error) {
	if configured != "" {
		fi, err := os.Stat(configured)
		if err != nil {
			return "", &pythonError{msg: msgConfiguredMissing + configured, kind: ErrPythonNotFound, cause: err}
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", &pythonError{msg: msgConfiguredNotExec + configured, kind: ErrPythonNotExecutable}
		}
		return configured, nil
	}

	var firstScript string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		// A relative entry would make the answer depend on the cwd.
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, "python3")
		switch kindOf(candidate) {
		case interpreterBinary:
			return candidate, nil
		case interpreterScript:
			if firstScript == "" {
				firstScript = candidate
			}
		}
	}
	if firstScript != "" {
		if real, ok := probeShim(firstScript); ok {
			return real, nil
		}
	}
	return "", &pythonError{msg: msgNotOnPath, kind: ErrPythonNotFound}
}

type interpreterKind int

const (
	interpreterNone interpreterKind = iota
	interpreterBinary
	interpreterScript
)

// kindOf classifies path as a runnable binary, a runnable script, or
// neither. An executable we may not read cannot be a script (an
// interpreter would have to read it), so it counts as a binary.
func kindOf(path string) interpreterKind {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return interpreterNone
	}
	f, err := os.Open(path)
	if err != nil {
		return interpreterBinary
	}
	defer f.Close()
	var magic [2]byte
	if _, err := io.ReadFull(f, magic[:]); err == nil && string(magic[:]) == "#!" {
		return interpreterScript
	}
	return interpreterBinary
}

func probeShim(shim string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shim, "-c", "import sys; print(sys.executable)")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", false
	}
	real := strings.TrimSpace(out.String())
	if !filepath.IsAbs(real) || kindOf(real) != interpreterBinary {
		return "", false
	}
	return real, true
}
