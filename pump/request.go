package pump

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// validRequest is an authenticated, validated helper call. Its id comes from
// the file name, never from the body.
type validRequest struct {
	Tool   string
	Params map[string]any
}

// maxRequestBytes bounds what the pump reads of one request file. The
// shim's requests are a few hundred bytes; a larger file is never read,
// so its MAC is never checked and it fails authentication.
const maxRequestBytes = 1 << 20

// NewToken returns a fresh bridge token: 32 random bytes, base64url
// without padding (43 characters of [A-Za-z0-9_-]).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("bridge token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// parseRequest authenticates and validates a request file: num and mac are the number and MAC of its name, body its
// bytes. Authentication comes first: a MAC that does not match (in
// constant time) the body under a non-empty token is errAuth, whatever the
// body holds. An authenticated body that is not a JSON object of valid
// UTF-8, whose "tool" is not a string, or whose "params" is neither
// absent, null, false nor an object is errInvalid. The caller must apply
// the replay and budget gates between the two, which is why both come
// from one pure function: the order is the caller's, the verdicts are
// here.
func parseRequest(token, num, mac string, body []byte) (validRequest, error) {
	if !validMAC(token, KindRequest, num, body, mac) {
		return validRequest{}, fmt.Errorf("%w: mac mismatch", errAuth)
	}
	if !utf8.Valid(body) {
		return validRequest{}, fmt.Errorf("%w: body is not UTF-8", errInvalid)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return validRequest{}, fmt.Errorf("%w: body is not a JSON object", errInvalid)
	}

	var req validRequest
	raw, ok := fields["tool"]
	if !ok || !isJSONString(raw) {
		return validRequest{}, fmt.Errorf("%w: tool is not a string", errInvalid)
	}
	if err := json.Unmarshal(raw, &req.Tool); err != nil {
		return validRequest{}, fmt.Errorf("%w: tool is not a string", errInvalid)
	}
	req.Params = map[string]any{}
	raw = bytes.TrimSpace(fields["params"])
	switch {
	case len(raw) == 0, bytes.Equal(raw, []byte("null")), bytes.Equal(raw, []byte("false")):
	case raw[0] == '{':
		// A number float64 cannot hold (1e400) fails here: the tool
		// could not take it, so the call is invalid, not unauthenticated.
		if err := json.Unmarshal(raw, &req.Params); err != nil {
			return validRequest{}, fmt.Errorf("%w: params: %w", errInvalid, err)
		}
	default:
		return validRequest{}, fmt.Errorf("%w: params is not an object", errInvalid)
	}
	return req, nil
}

// isJSONString reports whether raw is a JSON string literal; json.Unmarshal
// into a string would silently accept null.
func isJSONString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}
