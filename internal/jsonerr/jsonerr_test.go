package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

type record struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func decode(in string) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(in)))
	dec.DisallowUnknownFields()
	var r record
	return dec.Decode(&r)
}

func TestProblemNamesWhatIsWrongWithoutTheInput(t *testing.T) {
	long := strings.Repeat("x", 100)
	for in, want := range map[string]string{
		"\xff\xfe garbage":                 "not JSON at byte 1",
		`[1, 2]`:                           "not a JSON object",
		`{"count": "4"}`:                   `field "count" has the wrong type`,
		`{"count": 1e400}`:                 `field "count" has the wrong type`,
		``:                                 "empty or cut short",
		`{"name": "a"`:                     "empty or cut short",
		`{"name": "a", "admin\u001b": 1}`:  `unknown field "admin\x1b"`,
		`{"` + long + `": 1}`:              `unknown field "` + long[:64] + `"…`,
		`{"name": "a", "secret-token": 1}`: `unknown field "secret-token"`,
	} {
		assert.Equal(t, want, Problem(decode(in)), in)
	}
	assert.Empty(t, Problem(errors.New("something else")), "the caller names other errors")
}

func TestQuoteIsASCIIAndBounded(t *testing.T) {
	assert.Equal(t, `"caf\u00e9\x00"`, Quote("café\x00"))
	assert.Equal(t, `"`+strings.Repeat("é", 32)+`"…`, strings.ReplaceAll(Quote(strings.Repeat("é", 40)), `\u00e9`, "é"))
}

func TestDecodeStrictTakesOneKnownValueAndNothingAfter(t *testing.T) {
	var r record
	assert.Empty(t, DecodeStrict([]byte(`{"name": "a", "count": 2}`), &r, "record"))
	assert.Equal(t, record{Name: "a", Count: 2}, r)
	assert.Equal(t, "data after the record", DecodeStrict([]byte(`{"name": "a"} {}`), &r, "record"))
	assert.Equal(t, `unknown field "x"`, DecodeStrict([]byte(`{"x": 1}`), &r, "record"))
	assert.Equal(t, "empty or cut short", DecodeStrict(nil, &r, "record"))
}
