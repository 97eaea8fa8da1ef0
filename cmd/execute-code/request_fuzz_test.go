package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/executecode/executecode/approval"
)

// FuzzServeLine feeds arbitrary client bytes through what serve does with
// stdin before any op runs: split into capped lines, decode each, decode
// its op's arguments, and encode the answer an error would get. limit caps
// a line (0 means the real cap) so that the too-long path is reached with
// small inputs.
func FuzzServeLine(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"op":"attach","session":"s","agent":"main"}`,
		`{"id":"d","op":"detach","session":"s"}`,
		`{"id":2,"op":"execute","session":"s","script":"text('hi')","timeout_ms":500,"reset":true}`,
		`{"id":3,"op":"execute","script":""}`,
		`{"id":{"nested":[1,2]},"op":"snapshot"}`,
		`{"id":4,"op":"approve","approval_id":"appr_1","decision":"allow"}`,
		`{"id":5,"op":"approve","approval_id":"appr_1","decision":"maybe"}`,
		`{"id":6,"op":"dance"}`,
		`{"id":7,"op":5}`,
		`{"id":8,"op":null}`,
		`{"id":null,"op":"attach","session":null,"agent":null}`,
		`{"id":9,"op":"attach","session":5,"agent":true}`,
		`{"id":10,"op":"execute","script":7,"timeout_ms":"soon","reset":"yes"}`,
		`{"id":11,"op":"execute","script":"x","timeout_ms":1.5}`,
		`{"id":12,"op":"detach","session":[]}`,
		`{"id":1e400,"op":"snapshot","op":"detach"}`,
		`{"id":"\u2028\ud800","op":"snap\u0000shot"}`,
		"{\"id\":13,\"op\":\"attach\",\"session\":\"\xff\xfe\",\"agent\":\"a\"}",
		"{\"id\":14,\"op\":\"snap\x00shot\"}",
		`null`, `[1,2]`, `42`, `{not json`, `{"id":1,"op":"snapshot"} tail`, `   `,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"id":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"op":"x"}`,
		"{\"op\":\"snapshot\"}\n\n{\"op\":\"detach\",\"session\":\"s\"}\r\n{\"op\":\"execute\"}",
	} {
		f.Add([]byte(s), uint16(0))
	}
	f.Add([]byte(`{"id":1,"op":"snapshot","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`+"\n"+`{"id":2,"op":"snapshot"}`), uint16(30))
	f.Add([]byte("\n\n\n"), uint16(1))
	// A line of exactly the cap, and one byte over it.
	exact := []byte(`{"id":1,"op":"snapshot"}` + "\n")
	f.Add(exact, uint16(len(exact)))
	f.Add(exact, uint16(len(exact)-1))

	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		lineCap := maxLine
		if limit != 0 {
			lineCap = int(limit)
		}
		// The smallest buffer bufio allows, so that long lines arrive in
		// many chunks.
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		var scratch []byte
		for i, want := range bytes.SplitAfter(data, []byte("\n")) {
			line, tooLong, err := readLine(r, lineCap, &scratch)
			if len(line) > lineCap {
				t.Fatalf("line %d: %d bytes over a cap of %d", i, len(line), lineCap)
			}
			if tooLong != (len(want) > lineCap) {
				t.Fatalf("line %d of %d bytes, cap %d: tooLong = %v", i, len(want), lineCap, tooLong)
			}
			if !tooLong && !bytes.Equal(line, want) {
				t.Fatalf("line %d: read %q, want %q", i, line, want)
			}
			if tooLong && len(line) != 0 {
				t.Fatalf("line %d: too long yet %d bytes returned", i, len(line))
			}
			if last := err != nil; last != !bytes.HasSuffix(want, []byte("\n")) {
				t.Fatalf("line %d (%q): err = %v", i, want, err)
			}
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				checkLine(t, line, tooLong)
			}
		}
	})
}

var knownOps = map[string]bool{"attach": true, "detach": true, "execute": true, "snapshot": true, "approve": true}

// checkLine decodes one line as serve's handle does and checks every
// answer that could not depend on the runtime.
func checkLine(t *testing.T, line []byte, tooLong bool) {
	t.Helper()
	req, err := decodeRequest(line, tooLong)
	if err != nil {
		if tooLong && err.Error() != fmt.Sprintf("request line longer than %d bytes", maxLine) {
			t.Fatalf("too long line answered %q", err)
		}
		checkErrorAnswer(t, req.ID, err)
		return
	}
	if tooLong {
		t.Fatalf("too long line accepted as %+v", req)
	}
	checkEcho(t, req.ID)
	checkDecodeValue(t, req)
	args, err := decodeOp(req)
	if !knownOps[req.Op] {
		if !errors.Is(err, errUnknownOp) || err.Error() != fmt.Sprintf("unknown op %q", req.Op) {
			t.Fatalf("op %q: %v", req.Op, err)
		}
		checkErrorAnswer(t, req.ID, err)
		return
	}
	if err != nil {
		if errors.Is(err, errUnknownOp) || !strings.HasPrefix(err.Error(), req.Op+": ") {
			t.Fatalf("op %q: error %q does not name it", req.Op, err)
		}
		checkErrorAnswer(t, req.ID, err)
		return
	}
	var op string
	switch a := args.(type) {
	case attachArgs:
		op = "attach"
	case detachArgs:
		op = "detach"
	case executeArgs:
		op = "execute"
	case snapshotArgs:
		op = "snapshot"
	case approveArgs:
		op = "approve"
		if d, err := approval.ParseDecision(string(a.Decision)); err != nil || d != a.Decision {
			t.Fatalf("accepted decision %q does not parse back: %v", a.Decision, err)
		}
	}
	if op != req.Op {
		t.Fatalf("op %q decoded as %T", req.Op, args)
	}
}

// checkErrorAnswer: the error reads as text and goes out as one JSON line
// holding exactly the id that came in and the message.
func checkErrorAnswer(t *testing.T, id json.RawMessage, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" || !utf8.ValidString(msg) {
		t.Fatalf("error message %q is empty or not UTF-8", msg)
	}
	checkEcho(t, id)
	var buf bytes.Buffer
	newLineWriter(&buf, nil).send(errorAnswer(id, msg))
	out := buf.Bytes()
	if bytes.IndexByte(out, '\n') != len(out)-1 {
		t.Fatalf("answer is not one line: %q", out)
	}
	var got struct {
		ID    json.RawMessage `json:"id"`
		Error *string         `json:"error"`
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(out, &fields); err != nil || len(fields) != 2 {
		t.Fatalf("answer %q: %d fields, %v", out, len(fields), err)
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Error == nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	if *got.Error != msg {
		t.Fatalf("answer carries %q, want %q", *got.Error, msg)
	}
	want := []byte("null")
	if len(id) > 0 {
		var c bytes.Buffer
		if err := json.Compact(&c, id); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		want = c.Bytes()
	}
	if !bytes.Equal(got.ID, want) {
		t.Fatalf("answer echoes id %q, want %q", got.ID, want)
	}
}

// checkEcho: whatever id a request carried marshals back to valid JSON.
func checkEcho(t *testing.T, id json.RawMessage) {
	t.Helper()
	b, err := json.Marshal(idValue(id))
	if err != nil || !json.Valid(b) {
		t.Fatalf("id %q does not re-marshal: %q, %v", id, b, err)
	}
}

// checkDecodeValue: the direct reads of decodeValue agree with
// json.Unmarshal on every field of an accepted line, as a string and as
// a boolean.
func checkDecodeValue(t *testing.T, req request) {
	t.Helper()
	for name, raw := range req.raw {
		var fast, slow string
		fastErr, slowErr := decodeValue(raw, &fast), json.Unmarshal(raw, &slow)
		if (fastErr == nil) != (slowErr == nil) || fast != slow {
			t.Fatalf("field %q = %s as a string: %q, %v; json.Unmarshal: %q, %v", name, raw, fast, fastErr, slow, slowErr)
		}
		var fb, sb bool
		fastErr, slowErr = decodeValue(raw, &fb), json.Unmarshal(raw, &sb)
		if (fastErr == nil) != (slowErr == nil) || fb != sb {
			t.Fatalf("field %q = %s as a boolean: %v, %v; json.Unmarshal: %v, %v", name, raw, fb, fastErr, sb, slowErr)
		}
	}
}
