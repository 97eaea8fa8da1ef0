package frame

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Protocol constants (docs/protocol.md, Part 2).
const (
	// Prefix starts every frame the runner writes on its control fd.
	Prefix = "\x1elemon-python\t"
	// MaxBytes caps one frame line, prefix included, newline excluded.
	MaxBytes = 262144
	// MaxStreamChunk caps the decoded payload of one stream frame.
	MaxStreamChunk = 65536
)

// Frame types (docs/protocol.md, Frames).
const (
	Ready     = "ready"
	Started   = "started"
	Stream    = "stream"
	Exception = "exception"
	Done      = "done"
	Fatal     = "fatal"
	Bye       = "bye"
)

// ErrProtocol is wrapped by every parser error: the runner broke the frame
// protocol and the kernel cannot be trusted any more.
var ErrProtocol = errors.New("protocol violation")

// ProtocolError names the parser check that failed. Detail may
// quote at most a short sample of the offending bytes: it is for logs,
// never for telemetry or results.
type ProtocolError struct {
	Check  string
	Detail string
}

func (e *ProtocolError) Error() string {
	if e.Detail == "" {
		return ErrProtocol.Error() + ": " + e.Check
	}
	return ErrProtocol.Error() + ": " + e.Check + ": " + e.Detail
}

func (e *ProtocolError) Unwrap() error { return ErrProtocol }

// Checks of the frame parser (docs/protocol.md, Frames), as
// ProtocolError.Check. CheckFatal is the worker's, not the parser's: a
// well-formed fatal frame ends the kernel as a protocol fault too.
const (
	CheckFatal             = "fatal"
	CheckBadPrefix         = "bad_prefix"
	CheckFrameTooLarge     = "frame_too_large"
	CheckInvalidJSON       = "invalid_json"
	CheckMissingField      = "missing_field"
	CheckInvalidVersion    = "invalid_version"
	CheckUnknownType       = "unknown_type"
	CheckUnexpectedFrame   = "unexpected_frame"
	CheckCellAlreadyActive = "cell_already_active"
	CheckNoActiveCell      = "no_active_cell"
	CheckWrongID           = "wrong_id"
	CheckInvalidField      = "invalid_field"
	CheckInvalidStream     = "invalid_stream"
	CheckInvalidBase64     = "invalid_base64"
	CheckStreamTooLarge    = "stream_too_large"
)

// Frame is one parsed runner frame. Only the fields of its Type are set.
type Frame struct {
	Type string
	// ID is the cell of started, stream, exception and done.
	ID string
	// PID is ready's optional pid (0 when absent or null).
	PID int
	// Stream is "stdout" or "stderr"; Data the decoded chunk.
	Stream string
	Data   []byte
	// Kind, Name, Message and Traceback describe an exception.
	Kind, Name, Message, Traceback string
	// Reason is fatal's optional reason.
	Reason string
	// Dropped is done's optional count of output bytes the runner dropped
	// as no cell's: written by threads of earlier cells, or read while no
	// cell was open.
	Dropped int
}

// Parser is the host's incremental frame parser. Feed
// accepts any split or coalescing of the byte stream. It fails closed: the
// first error rejects the whole chunk it was found in, and every later
// Feed returns the same error, so a parser that failed is never trusted
// again. The zero value is ready to use.
type Parser struct {
	buf       []byte
	open      string // id of the open cell, "" if none
	readySeen bool
	closed    string // "bye" or "fatal" once the process announced its end
	err       error
	slowOnly  bool // tests and benchmarks: no stream fast path
}

var prefix = []byte(Prefix)

// Feed adds chunk to the stream and returns the frames it completed, in
// arrival order. An empty chunk is accepted and completes nothing.
func (p *Parser) Feed(chunk []byte) ([]Frame, error) {
	if p.err != nil {
		return nil, p.err
	}
	frames, err := p.feed(chunk)
	if err != nil {
		p.err = err
		p.buf = nil
		return nil, err
	}
	return frames, nil
}

func (p *Parser) feed(chunk []byte) ([]Frame, error) {
	p.buf = append(p.buf, chunk...)
	if err := checkPrefix(p.buf); err != nil {
		return nil, err
	}
	var frames []Frame
	rest := p.buf
	for {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		line := rest[:nl]
		rest = rest[nl+1:]
		if len(line) > MaxBytes {
			return nil, protoErr(CheckFrameTooLarge, strconv.Itoa(len(line)))
		}
		if !bytes.HasPrefix(line, prefix) {
			return nil, protoErr(CheckBadPrefix, sample(line))
		}
		f, err := p.frame(line[len(prefix):])
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
	}
	if len(rest) > MaxBytes {
		return nil, protoErr(CheckFrameTooLarge, strconv.Itoa(len(rest)))
	}
	// A remainder that already diverges from the prefix can never become
	// a frame: reject it now rather than wait for its newline.
	if err := checkPrefix(rest); err != nil {
		return nil, err
	}
	// Keep only the remainder, in a buffer of its own, so a long-lived
	// parser does not pin the chunks it has consumed.
	p.buf = append(p.buf[:0:0], rest...)
	return frames, nil
}

// checkPrefix accepts b when it starts with the prefix or is a prefix of
// it (the empty buffer included).
func checkPrefix(b []byte) error {
	n := min(len(b), len(prefix))
	if bytes.Equal(b[:n], prefix[:n]) {
		return nil
	}
	return protoErr(CheckBadPrefix, sample(b))
}

// Sample quotes at most the first 32 bytes of s, marking a cut with
// "...": the bound on what of the runner's bytes a ProtocolError.Detail
// may carry.
func Sample(s string) string { return sample([]byte(s)) }

func sample(b []byte) string {
	if len(b) > 32 {
		return strconv.Quote(string(b[:32])) + "..."
	}
	return strconv.Quote(string(b))
}

func protoErr(check, detail string) error {
	return &ProtocolError{Check: check, Detail: detail}
}

// frame decodes and validates one frame body against the parser's state,
// and advances that state only when the frame is accepted.
func (p *Parser) frame(body []byte) (Frame, error) {
	obj, ok := streamFastPath(body)
	if !ok {
		obj, ok = cellFastPath(body)
	}
	if !ok || p.slowOnly {
		var err error
		if obj, err = decodeObject(body); err != nil {
			return Frame{}, err
		}
	}
	return p.validate(obj)
}

// streamFastPath decodes the one shape the runner writes for stream
// frames, which are nearly all of a session's frame bytes:
// {"v":1,"type":"stream","id":"<id>","stream":"stdout|stderr","data":"<b64>"},
// compact, in that order, with an id of printable ASCII other than a quote
// or a backslash, and base64 data. For such a body it returns exactly what
// decodeObject would (FuzzStreamFastPath checks it) without the two JSON
// passes over the data; anything else goes the general way.
func streamFastPath(body []byte) (map[string]any, bool) {
	rest, ok := bytes.CutPrefix(body, fastStreamHead)
	if !ok {
		return nil, false
	}
	id, rest, ok := fastID(rest)
	if !ok {
		return nil, false
	}
	var stream string
	switch {
	case bytes.HasPrefix(rest, fastStreamStdout):
		stream, rest = "stdout", rest[len(fastStreamStdout):]
	case bytes.HasPrefix(rest, fastStreamStderr):
		stream, rest = "stderr", rest[len(fastStreamStderr):]
	default:
		return nil, false
	}
	data, ok := bytes.CutSuffix(rest, fastStreamTail)
	if !ok {
		return nil, false
	}
	for _, c := range data {
		if !isBase64Char(c) {
			return nil, false
		}
	}
	return map[string]any{
		"v": json.Number("1"), "type": Stream, "id": string(id), "stream": stream, "data": string(data),
	}, true
}

// fastID splits a fast path's id, up to its closing quote, from the rest
// of the body: at least one byte of printable ASCII other than a
// backslash (the quote ends it), which JSON decodes to itself.
func fastID(rest []byte) (id, after []byte, ok bool) {
	q := bytes.IndexByte(rest, '"')
	if q <= 0 {
		return nil, nil, false
	}
	for _, c := range rest[:q] {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return nil, nil, false
		}
	}
	return rest[:q], rest[q:], true
}

var (
	fastStreamHead   = []byte(`{"v":1,"type":"stream","id":"`)
	fastStreamStdout = []byte(`","stream":"stdout","data":"`)
	fastStreamStderr = []byte(`","stream":"stderr","data":"`)
	fastStreamTail   = []byte(`"}`)
)

// cellFastPath decodes the two frames every cell has, in the shapes the
// runner writes them: {"v":1,"type":"started","id":"<id>"} and
// {"v":1,"type":"done","id":"<id>","dropped":<n>}, compact, in that
// order, with an id as streamFastPath takes it and n a JSON integer of
// digits. For such a body it returns exactly what decodeObject would
// (FuzzCellFastPath checks it); anything else goes the general way.
func cellFastPath(body []byte) (map[string]any, bool) {
	var typ string
	var rest []byte
	switch {
	case bytes.HasPrefix(body, fastStartedHead):
		typ, rest = Started, body[len(fastStartedHead):]
	case bytes.HasPrefix(body, fastDoneHead):
		typ, rest = Done, body[len(fastDoneHead):]
	default:
		return nil, false
	}
	id, rest, ok := fastID(rest)
	if !ok {
		return nil, false
	}
	if typ == Started {
		if !bytes.Equal(rest, fastStartedTail) {
			return nil, false
		}
		return map[string]any{"v": json.Number("1"), "type": Started, "id": string(id)}, true
	}
	digits, ok := bytes.CutPrefix(rest, fastDoneDropped)
	if !ok {
		return nil, false
	}
	if digits, ok = bytes.CutSuffix(digits, fastDoneTail); !ok || len(digits) == 0 || len(digits) > 18 ||
		(digits[0] == '0' && len(digits) > 1) {
		return nil, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, false
		}
	}
	return map[string]any{"v": json.Number("1"), "type": Done, "id": string(id), "dropped": json.Number(digits)}, true
}

var (
	fastStartedHead = []byte(`{"v":1,"type":"started","id":"`)
	fastStartedTail = []byte(`"}`)
	fastDoneHead    = []byte(`{"v":1,"type":"done","id":"`)
	fastDoneDropped = []byte(`","dropped":`)
	fastDoneTail    = []byte(`}`)
)

// decodeObject is the general decoding of a frame body: valid JSON, one
// object, numbers kept as written.
func decodeObject(body []byte) (map[string]any, error) {
	if !json.Valid(body) {
		var probe any
		err := json.Unmarshal(body, &probe)
		detail := "malformed"
		if err != nil {
			detail = err.Error()
		}
		return nil, protoErr(CheckInvalidJSON, detail)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // so "v":1.0 can be told from "v":1
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, protoErr(CheckInvalidJSON, err.Error())
	}
	obj, isObject := raw.(map[string]any)
	if !isObject {
		return nil, protoErr(CheckInvalidJSON, "not an object")
	}
	return obj, nil
}

// validate checks a decoded frame against the parser's state and advances
// that state only when the frame is accepted.
func (p *Parser) validate(obj map[string]any) (Frame, error) {
	v, ok := obj["v"]
	if !ok {
		return Frame{}, protoErr(CheckMissingField, "v")
	}
	if n, isNum := v.(json.Number); !isNum || n.String() != "1" {
		return Frame{}, protoErr(CheckInvalidVersion, describe(v))
	}
	t, ok := obj["type"]
	if !ok || t == nil {
		return Frame{}, protoErr(CheckMissingField, "type")
	}
	typ, _ := t.(string)
	switch typ {
	case Ready, Started, Stream, Exception, Done, Fatal, Bye:
	default:
		return Frame{}, protoErr(CheckUnknownType, describe(t))
	}
	if p.closed != "" {
		return Frame{}, protoErr(CheckUnexpectedFrame, typ)
	}

	f := Frame{Type: typ}
	var err error
	switch typ {
	case Ready:
		if p.readySeen {
			return Frame{}, protoErr(CheckUnexpectedFrame, typ)
		}
		if f.PID, err = optionalPID(obj); err != nil {
			return Frame{}, err
		}
		p.readySeen = true
	case Started:
		if f.ID, err = requiredString(obj, "id"); err != nil {
			return Frame{}, err
		}
		if p.open != "" {
			return Frame{}, protoErr(CheckCellAlreadyActive, strconv.Quote(p.open))
		}
		p.open = f.ID
	case Stream:
		if err = p.fillStream(obj, &f); err != nil {
			return Frame{}, err
		}
	case Exception:
		if err = p.fillException(obj, &f); err != nil {
			return Frame{}, err
		}
	case Done:
		if f.ID, err = p.openCell(obj); err != nil {
			return Frame{}, err
		}
		if f.Dropped, err = optionalCount(obj, "dropped"); err != nil {
			return Frame{}, err
		}
		p.open = ""
	case Fatal:
		if f.Reason, err = optionalString(obj, "reason"); err != nil {
			return Frame{}, err
		}
		p.closed = typ
	case Bye:
		p.closed = typ
	}
	return f, nil
}

func (p *Parser) fillStream(obj map[string]any, f *Frame) error {
	id, err := p.openCell(obj)
	if err != nil {
		return err
	}
	s, ok := obj["stream"]
	if !ok || s == nil {
		return protoErr(CheckMissingField, "stream")
	}
	stream, _ := s.(string)
	if stream != "stdout" && stream != "stderr" {
		return protoErr(CheckInvalidStream, describe(s))
	}
	data, err := requiredString(obj, "data")
	if err != nil {
		return err
	}
	decoded, err := decodeBase64(data)
	if err != nil {
		return err
	}
	if len(decoded) > MaxStreamChunk {
		return protoErr(CheckStreamTooLarge, strconv.Itoa(len(decoded)))
	}
	f.ID, f.Stream, f.Data = id, stream, decoded
	return nil
}

var exceptionKinds = map[string]bool{
	"error": true, "system_exit": true, "unsupported_input": true, "interrupted": true,
}

func (p *Parser) fillException(obj map[string]any, f *Frame) error {
	id, err := p.openCell(obj)
	if err != nil {
		return err
	}
	k, ok := obj["kind"]
	if !ok || k == nil {
		return protoErr(CheckMissingField, "kind")
	}
	kind, _ := k.(string)
	if !exceptionKinds[kind] {
		return protoErr(CheckInvalidField, "kind="+describe(k))
	}
	name, err := requiredString(obj, "name")
	if err != nil {
		return err
	}
	msg, err := optionalString(obj, "message")
	if err != nil {
		return err
	}
	tb, err := optionalString(obj, "traceback")
	if err != nil {
		return err
	}
	f.ID, f.Kind, f.Name, f.Message, f.Traceback = id, kind, name, msg, tb
	return nil
}

// openCell validates the id of a frame that needs the open cell.
func (p *Parser) openCell(obj map[string]any) (string, error) {
	id, err := requiredString(obj, "id")
	if err != nil {
		return "", err
	}
	if p.open == "" {
		return "", protoErr(CheckNoActiveCell, "")
	}
	if id != p.open {
		return "", protoErr(CheckWrongID, fmt.Sprintf("open %q, got %q", p.open, id))
	}
	return id, nil
}

func requiredString(obj map[string]any, field string) (string, error) {
	v, ok := obj[field]
	if !ok || v == nil {
		return "", protoErr(CheckMissingField, field)
	}
	s, isString := v.(string)
	if !isString || s == "" {
		return "", protoErr(CheckInvalidField, field+"="+describe(v))
	}
	return s, nil
}

func optionalString(obj map[string]any, field string) (string, error) {
	v, ok := obj[field]
	if !ok || v == nil {
		return "", nil
	}
	s, isString := v.(string)
	if !isString {
		return "", protoErr(CheckInvalidField, field+"="+describe(v))
	}
	return s, nil
}

// optionalPID accepts null, absence, or a positive integer literal.
func optionalPID(obj map[string]any) (int, error) {
	v, ok := obj["pid"]
	if !ok || v == nil {
		return 0, nil
	}
	n, isNum := v.(json.Number)
	if isNum {
		if pid, err := strconv.Atoi(n.String()); err == nil && pid > 0 {
			return pid, nil
		}
	}
	return 0, protoErr(CheckInvalidField, "pid="+describe(v))
}

// optionalCount accepts null, absence, or a non-negative integer literal.
func optionalCount(obj map[string]any, field string) (int, error) {
	v, ok := obj[field]
	if !ok || v == nil {
		return 0, nil
	}
	n, isNum := v.(json.Number)
	if isNum {
		if c, err := strconv.Atoi(n.String()); err == nil && c >= 0 {
			return c, nil
		}
	}
	return 0, protoErr(CheckInvalidField, field+"="+describe(v))
}

// decodeBase64 is standard base64 with padding and nothing else: Go's
// decoder skips CR and LF even in strict mode, the protocol does not.
func decodeBase64(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if !isBase64Char(s[i]) {
			return nil, protoErr(CheckInvalidBase64, sample([]byte(s)))
		}
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, protoErr(CheckInvalidBase64, sample([]byte(s)))
	}
	return b, nil
}

func isBase64Char(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// describe renders a JSON value for an error detail, bounded like sample.
func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	return sample(b)
}
