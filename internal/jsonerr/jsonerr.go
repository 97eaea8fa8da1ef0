// Package jsonerr names what is wrong with untrusted JSON that
// encoding/json refused, in words safe to log or return to a peer: a
// byte offset or a field name, bounded and quoted, never the input. It
// is the runtime's own machinery, with no compatibility promise.
package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxName bounds a field name quoted back from untrusted input.
const maxName = 64

// Problem says what err, returned by encoding/json's Unmarshal or a
// Decoder with DisallowUnknownFields, found wrong: "not JSON at byte N",
// "not a JSON object", "field "f" has the wrong type", "empty or cut
// short", "unknown field "f"". It is "" for any other error, which the
// caller names in its own terms.
func Problem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("not JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "not a JSON object"
		}
		return "field " + Quote(typ.Field) + " has the wrong type"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "empty or cut short"
	}
	// encoding/json reports an unknown field only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
		return "unknown field " + Quote(name)
	}
	return ""
}

// Quote quotes s, from untrusted input, for a log line or an error: in
// ASCII, its first 64 bytes and an ellipsis past them.
func Quote(s string) string {
	if len(s) > maxName {
		return strconv.QuoteToASCII(s[:maxName]) + "…"
	}
	return strconv.QuoteToASCII(s)
}

// DecodeStrict decodes data, one JSON value and nothing after it, into v,
// refusing fields v does not have. It returns "" when v holds the value,
// else what is wrong, in Problem's words, naming the value what ("data
// after the payload", "not a valid payload").
func DecodeStrict(data []byte, v any, what string) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if p := Problem(err); p != "" {
			return p
		}
		return "not a valid " + what
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "data after the " + what
	}
	return ""
}
