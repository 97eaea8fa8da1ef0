package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

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
// bytes.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > limit {
			tooLong = true
			buf = buf[:0]
		} else if !tooLong {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
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
	if op, ok := req.raw["op"]; !ok || json.Unmarshal(op, &req.Op) != nil {
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
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: field %q has the wrong type", req.Op, name)
	}
	return nil
}
