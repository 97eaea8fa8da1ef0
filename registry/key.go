package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/executecode/executecode/shimpy"
)

// Key is the identity of a kernel (docs/architecture.md, Keys): two calls
// share a kernel exactly when their keys are equal. Cwd and Interpreter are
// canonical (absolute, symlinks resolved); Helpers are de-duplicated and
// sorted. Anything not in a Key (run ids, policy, timeouts, bounds,
// environment) never selects a different kernel.
type Key struct {
	ScopeID     string
	AgentID     string
	Cwd         string
	Interpreter string
	Helpers     []string
	// ToolSet is the digest of the tool set the kernel's shim was rendered
	// for (names and host tools' schemas): the helper names alone would
	// let a kernel staged with one weather(city) serve a call expecting
	// another weather(city, days). Set it after NewKey; "" is none.
	ToolSet string
	// Sandbox is the confinement the kernel runs under ("" for none, else
	// the sandbox mode): a kernel started unconfined must never serve a
	// call that asks for confinement, nor the other way round. Set it
	// after NewKey.
	Sandbox         string
	ProtocolVersion int
}

// NewKey builds a canonical key. cwd must name a directory; interpreter
// is a path (a value containing "/") or a bare name looked up on PATH, and
// must resolve to a regular file with an execute bit. Relative paths are
// taken against the host's current directory and "~" is the home
// directory. Every error wraps ErrInvalidKey and names the field.
func NewKey(scopeID, agentID, cwd, interpreter string, helpers []string) (Key, error) {
	if strings.TrimSpace(scopeID) == "" {
		return Key{}, fmt.Errorf("%w: invalid_scope_id: blank", ErrInvalidKey)
	}
	if strings.TrimSpace(agentID) == "" {
		return Key{}, fmt.Errorf("%w: invalid_agent_id: blank", ErrInvalidKey)
	}
	canonCwd, err := canonicalCwd(cwd)
	if err != nil {
		return Key{}, err
	}
	canonInterp, err := canonicalInterpreter(interpreter)
	if err != nil {
		return Key{}, err
	}
	hs, err := canonicalHelpers(helpers)
	if err != nil {
		return Key{}, err
	}
	return Key{
		ScopeID:         scopeID,
		AgentID:         agentID,
		Cwd:             canonCwd,
		Interpreter:     canonInterp,
		Helpers:         hs,
		ProtocolVersion: shimpy.ProtocolVersion,
	}, nil
}

func canonicalCwd(cwd string) (string, error) {
	if cwd == "" {
		return "", fmt.Errorf("%w: cwd_not_found: empty", ErrInvalidKey)
	}
	expanded, err := expand(cwd)
	if err != nil {
		return "", fmt.Errorf("%w: cwd_not_found: %s: %w", ErrInvalidKey, cwd, err)
	}
	resolved, err := filepath.EvalSymlinks(expanded)
	if err != nil {
		return "", fmt.Errorf("%w: cwd_not_found: %s", ErrInvalidKey, expanded)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("%w: cwd_not_found: %s", ErrInvalidKey, expanded)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: cwd_not_directory: %s", ErrInvalidKey, expanded)
	}
	return resolved, nil
}

func canonicalInterpreter(interpreter string) (string, error) {
	if interpreter == "" {
		return "", fmt.Errorf("%w: interpreter_not_found: empty", ErrInvalidKey)
	}
	candidate := interpreter
	if strings.Contains(interpreter, "/") {
		var err error
		if candidate, err = expand(interpreter); err != nil {
			return "", fmt.Errorf("%w: interpreter_not_found: %s: %w", ErrInvalidKey, interpreter, err)
		}
	} else {
		found, err := exec.LookPath(interpreter)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%w: interpreter_not_found: %s", ErrInvalidKey, interpreter)
		}
		if candidate, err = filepath.Abs(found); err != nil {
			return "", fmt.Errorf("%w: interpreter_not_found: %s", ErrInvalidKey, interpreter)
		}
	}
	resolved, err := filepath.EvalSymlinks(candidate)
	if err != nil {
		return "", fmt.Errorf("%w: interpreter_not_found: %s", ErrInvalidKey, interpreter)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("%w: interpreter_not_found: %s", ErrInvalidKey, interpreter)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%w: interpreter_not_executable: %s", ErrInvalidKey, candidate)
	}
	return resolved, nil
}

// expand makes p absolute: "~" becomes the home directory, a relative
// path is joined to the current directory, and "." and ".." are collapsed
// lexically before any symlink is read.
func expand(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, p[1:])
	}
	return filepath.Abs(p)
}

func canonicalHelpers(helpers []string) ([]string, error) {
	out := make([]string, 0, len(helpers))
	for _, h := range helpers {
		if h == "" {
			return nil, fmt.Errorf("%w: invalid_helper: empty name", ErrInvalidKey)
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Digest is the lowercase hex SHA-256 of the key's canonical payload
// Equal keys have equal digests. It identifies a kernel
// inside this process only: it must never be logged or emitted, since it
// is derived from paths and session identities.
func (k Key) Digest() string {
	var b strings.Builder
	line := func(name, value string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strconv.Itoa(len(value)))
		b.WriteByte(':')
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(value)
	}
	line("scope_id", k.ScopeID)
	line("agent_id", k.AgentID)
	line("cwd", k.Cwd)
	line("interpreter", k.Interpreter)
	line("helpers", strings.Join(k.Helpers, "\x00"))
	if k.ToolSet != "" {
		// Absent for built-ins only, so such keys keep the reference's
		// digests.
		line("tool_set", k.ToolSet)
	}
	if k.Sandbox != "" {
		// Absent when unconfined, for the same reason.
		line("sandbox", k.Sandbox)
	}
	line("protocol_version", strconv.Itoa(k.ProtocolVersion))
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// Equal reports whether k and o name the same kernel.
func (k Key) Equal(o Key) bool {
	return k.ScopeID == o.ScopeID && k.AgentID == o.AgentID && k.Cwd == o.Cwd &&
		k.Interpreter == o.Interpreter && k.ProtocolVersion == o.ProtocolVersion &&
		slices.Equal(k.Helpers, o.Helpers) && k.ToolSet == o.ToolSet && k.Sandbox == o.Sandbox
}

// complete reports whether k could have come from NewKey: the registry
// refuses a key with a blank field rather than keying a kernel on it.
func (k Key) complete() bool {
	return strings.TrimSpace(k.ScopeID) != "" && strings.TrimSpace(k.AgentID) != "" &&
		filepath.IsAbs(k.Cwd) && filepath.IsAbs(k.Interpreter) && k.ProtocolVersion > 0 &&
		!slices.Contains(k.Helpers, "")
}
