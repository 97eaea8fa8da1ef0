package main

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/executecode/executecode/approval"
)

// Clients match these texts: each bad line is answered with exactly this
// error and, once the line is a JSON object, the id it carried.
func TestDecodeRequestNamesWhatIsWrongWithALine(t *testing.T) {
	cases := []struct {
		name, line string
		tooLong    bool
		id, err    string
	}{
		{"too long", `{"id":1,"op":"snapshot"}`, true, "", "request line longer than 16777216 bytes"},
		{"invalid UTF-8", "{\"id\":1,\"op\":\"\xff\"}", false, "", "request line is not valid UTF-8"},
		{"array", `[1,2]`, false, "", "request is not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"trailing garbage", `{"id":1,"op":"snapshot"} tail`, false, "", "request is not a JSON object: invalid character 't' after top-level value"},
		{"null", `null`, false, "", `field "op" must be a string`},
		{"missing op", `{"id":"x"}`, false, `"x"`, `field "op" must be a string`},
		{"op of wrong type", `{"id":2,"op":5}`, false, "2", `field "op" must be a string`},
	}
	for _, tc := range cases {
		req, err := decodeRequest([]byte(tc.line+"\n"), tc.tooLong)
		require.Error(t, err, tc.name)
		assert.Equal(t, tc.err, err.Error(), tc.name)
		assert.Equal(t, tc.id, string(req.ID), tc.name)
	}
}

func TestDecodeOpReadsEachOpsArguments(t *testing.T) {
	cases := []struct {
		line string
		want any
	}{
		{`{"op":"attach","session":"s","agent":"main"}`, attachArgs{Session: "s", Agent: "main"}},
		{`{"op":"detach","session":"s"}`, detachArgs{Session: "s"}},
		{`{"op":"execute","script":"x=1"}`, executeArgs{Script: "x=1"}},
		{`{"op":"execute","session":"s","script":"x=1","timeout_ms":500,"reset":true}`,
			executeArgs{Session: "s", Script: "x=1", TimeoutMS: 500, Reset: true}},
		{`{"op":"execute","session":null,"script":"x=1","timeout_ms":null,"reset":null}`, executeArgs{Script: "x=1"}},
		{`{"op":"snapshot","extra":[1]}`, snapshotArgs{}},
		{`{"op":"approve","approval_id":"appr_1","decision":"allow"}`, approveArgs{ApprovalID: "appr_1", Decision: approval.ApproveOnce}},
		{`{"op":"approve","approval_id":"appr_1","decision":"deny"}`, approveArgs{ApprovalID: "appr_1", Decision: approval.Deny}},
	}
	for _, tc := range cases {
		req, err := decodeRequest([]byte(tc.line), false)
		require.NoError(t, err, tc.line)
		args, err := decodeOp(req)
		require.NoError(t, err, tc.line)
		assert.Equal(t, tc.want, args, tc.line)
	}
}

func TestDecodeOpNamesEveryBadField(t *testing.T) {
	cases := []struct{ line, err string }{
		{`{"op":"attach"}`, "attach: missing field \"session\"\nattach: missing field \"agent\""},
		{`{"op":"attach","session":5,"agent":null}`, "attach: field \"session\" has the wrong type\nattach: missing field \"agent\""},
		{`{"op":"detach","session":[]}`, `detach: field "session" has the wrong type`},
		{`{"op":"execute","script":7,"timeout_ms":"soon","reset":"yes"}`,
			"execute: field \"script\" has the wrong type\nexecute: field \"timeout_ms\" has the wrong type\nexecute: field \"reset\" has the wrong type"},
		{`{"op":"execute","script":"x","timeout_ms":1.5}`, `execute: field "timeout_ms" has the wrong type`},
		{`{"op":"approve","approval_id":1}`, "approve: field \"approval_id\" has the wrong type\napprove: missing field \"decision\""},
		{`{"op":"approve","approval_id":"a","decision":"maybe"}`, `approve: field "decision": parse decision "maybe": invalid approval decision`},
		{`{"op":"dance"}`, `unknown op "dance"`},
		{`{"op":null}`, `unknown op ""`},
	}
	for _, tc := range cases {
		req, err := decodeRequest([]byte(tc.line), false)
		require.NoError(t, err, tc.line)
		_, err = decodeOp(req)
		require.Error(t, err, tc.line)
		assert.Equal(t, tc.err, err.Error(), tc.line)
	}
}

func TestDecodeOpWrapsWhatCallersBranchOn(t *testing.T) {
	req, err := decodeRequest([]byte(`{"op":"dance"}`), false)
	require.NoError(t, err)
	_, err = decodeOp(req)
	assert.True(t, errors.Is(err, errUnknownOp), "%v", err)

	req, err = decodeRequest([]byte(`{"op":"approve","approval_id":"a","decision":"maybe"}`), false)
	require.NoError(t, err)
	_, err = decodeOp(req)
	assert.ErrorIs(t, err, approval.ErrInvalidDecision)
}

// A line over the cap is consumed whole, returned empty, and the line
// after it is read intact.
func TestReadLineSkipsALineOverTheCap(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\nnext\ntail"), 16)
	type read struct {
		line    string
		tooLong bool
		eof     bool
	}
	var got []read
	var scratch []byte
	for {
		line, tooLong, err := readLine(r, 10, &scratch)
		got = append(got, read{string(line), tooLong, err != nil})
		if err != nil {
			break
		}
	}
	assert.Equal(t, []read{{"", true, false}, {"next\n", false, false}, {"tail", false, true}}, got)
}
