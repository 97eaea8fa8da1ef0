package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	executecode "github.com/executecode/executecode"
	"github.com/executecode/executecode/approval"
)

// maxLine bounds one request line; a longer line is answered with an error
// and skipped, so a runaway client cannot make the server buffer without
// limit.
const maxLine = 16 << 20

// errUnknownOp marks a well-formed request whose op serve does not answer.
var errUnknownOp = errors.New("unknown op")

// request is one decoded line. Fields are kept raw until an op's decoder
// reads them, so that a wrong type can be named precisely.
type request struct {
	ID  json.RawMessage
	Op  string
	raw map[string]json.RawMessage
}

// The arguments of each op, as its decoder reads them from a request.
type (
	attachArgs struct{ Session, Agent string }
	detachArgs struct{ Session string }
	// executeArgs: TimeoutMS 0 means the request named no timeout.
	executeArgs struct {
		Session, Script string
		TimeoutMS       int
		Reset           bool
	}
	snapshotArgs struct{}
	approveArgs  struct {
		ApprovalID string
		Decision   approval.Decision
	}
)

// readLine reads one line of at most limit bytes, its '\n' included; a
// longer one is consumed to its end and reported as too long, with no
// bytes. A line that is whole in r's buffer is returned in place; one
// that is not is assembled in *scratch (when not nil), which is kept for
// the next line unless it grew large. Either is valid only until the
// next read.
func readLine(r *bufio.Reader, limit int, scratch *[]byte) (line []byte, tooLong bool, err error) {
	chunk, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) && len(chunk) <= limit {
		return chunk, false, err
	}
	var buf []byte
	if scratch != nil {
		buf = (*scratch)[:0]
	}
	for {
		if len(buf)+len(chunk) > limit {
			tooLong = true
			buf = buf[:0]
		} else if !tooLong {
			buf = append(buf, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
		chunk, err = r.ReadSlice('\n')
	}
	if scratch != nil {
		*scratch = nil
		if cap(buf) <= keptLine {
			*scratch = buf[:0]
		}
	}
	return buf, tooLong, err
}

// keptLine bounds the scratch buffer a long line leaves for the next.
const keptLine = 1 << 20

// lineBuffered: a whole line waits in r's buffer, so reading it cannot
// block.
func lineBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// decodeRequest checks one line as readLine returned it and reads its id
// and op. On error the returned request still carries the id when the
// line was a JSON object, so that the error answer can echo it.
func decodeRequest(line []byte, tooLong bool) (request, error) {
	var req request
	if tooLong {
		return req, fmt.Errorf("request line longer than %d bytes", maxLine)
	}
	if !utf8.Valid(line) {
		return req, errors.New("request line is not valid UTF-8")
	}
	if err := json.Unmarshal(line, &req.raw); err != nil {
		return req, errors.New("request is not a JSON object: " + err.Error())
	}
	req.ID = req.raw["id"]
	if op, ok := req.raw["op"]; !ok || decodeValue(op, &req.Op) != nil {
		return req, errors.New(`field "op" must be a string`)
	}
	return req, nil
}

// decodeOp reads the arguments of req's op: one of the *Args types, or an
// error wrapping errUnknownOp.
func decodeOp(req request) (any, error) {
	switch req.Op {
	case "attach":
		return decodeAttach(req)
	case "detach":
		return decodeDetach(req)
	case "execute":
		return decodeExecute(req)
	case "snapshot":
		return snapshotArgs{}, nil
	case "approve":
		return decodeApprove(req)
	}
	return nil, fmt.Errorf("%w %q", errUnknownOp, req.Op)
}

// Every field error of a request is reported at once, not only the first.

func decodeAttach(req request) (attachArgs, error) {
	var a attachArgs
	err := errors.Join(req.field("session", &a.Session, true), req.field("agent", &a.Agent, true))
	return a, err
}

func decodeDetach(req request) (detachArgs, error) {
	var a detachArgs
	err := req.field("session", &a.Session, true)
	return a, err
}

// call is the Call of an execute request, as executecode.CallFromParams
// reads the same fields once decoded: an empty script is
// ErrMissingScript; reset and timeout_ms have their types already.
func (a executeArgs) call() (executecode.Call, error) {
	if a.Script == "" {
		return executecode.Call{}, executecode.ErrMissingScript
	}
	return executecode.Call{Script: a.Script, TimeoutMS: a.TimeoutMS, Reset: a.Reset}, nil
}

func decodeExecute(req request) (executeArgs, error) {
	var a executeArgs
	err := errors.Join(req.field("session", &a.Session, false), req.field("script", &a.Script, true),
		req.field("timeout_ms", &a.TimeoutMS, false), req.field("reset", &a.Reset, false))
	return a, err
}

// decodeApprove accepts the decisions approval.ParseDecision does: allow
// (= approve_once), approve_session, approve_agent, approve_global, deny.
func decodeApprove(req request) (approveArgs, error) {
	var a approveArgs
	var decision string
	if err := errors.Join(req.field("approval_id", &a.ApprovalID, true), req.field("decision", &decision, true)); err != nil {
		return a, err
	}
	d, err := approval.ParseDecision(decision)
	if err != nil {
		return a, fmt.Errorf("approve: field \"decision\": %w", err)
	}
	a.Decision = d
	return a, nil
}

// field decodes an optional field into v; a present field of the wrong
// type is an error naming it.
func (req request) field(name string, v any, required bool) error {
	raw, ok := req.raw[name]
	if !ok || string(raw) == "null" {
		if required {
			return fmt.Errorf("%s: missing field %q", req.Op, name)
		}
		return nil
	}
	if err := decodeValue(raw, v); err != nil {
		return fmt.Errorf("%s: field %q has the wrong type", req.Op, name)
	}
	return nil
}

// decodeValue is json.Unmarshal of one value of a line decodeRequest
// accepted, with the common cases read directly: a string without
// escapes (whose bytes, valid UTF-8 and free of control characters in a
// valid line, are the string) and a boolean.
func decodeValue(raw json.RawMessage, v any) error {
	switch p := v.(type) {
	case *string:
		if s, ok := plainString(raw); ok {
			*p = s
			return nil
		}
	case *bool:
		switch string(raw) {
		case "true":
			*p = true
			return nil
		case "false":
			*p = false
			return nil
		}
	}
	return json.Unmarshal(raw, v)
}

// plainString is the JSON string raw holds when it has no escapes.
func plainString(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}
