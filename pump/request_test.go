package pump

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fuzzToken = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

func TestParseRequestVerdicts(t *testing.T) {
	cases := []struct {
		name, body string
		want       error
	}{
		{"valid", `{"id":1,"token":"` + fuzzToken + `","tool":"read","params":{"path":"a"}}`, nil},
		{"wrong length", `{"token":"AAAA","tool":"read"}`, ErrAuth},
		{"null token", `{"token":null,"tool":"read"}`, ErrAuth},
		{"token differs", `{"token":"` + fuzzToken[:42] + `B","tool":"read"}`, ErrAuth},
		{"token key case", `{"Token":"` + fuzzToken + `","tool":"read"}`, ErrAuth},
		{"array", `[1,2]`, ErrAuth},
		{"invalid utf8", "{\"token\":\"" + fuzzToken + "\",\"tool\":\"\xc3\"}", ErrAuth},
		{"huge number in params", `{"token":"` + fuzzToken + `","tool":"read","params":{"n":1e999}}`, ErrInvalid},
		{"huge integer id", `{"id":123456789012345678901234567890,"token":"` + fuzzToken + `","tool":"read"}`, nil},
		{"tool object", `{"token":"` + fuzzToken + `","tool":{}}`, ErrInvalid},
		{"duplicate token, last wins", `{"token":"x","token":"` + fuzzToken + `","tool":"read"}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(c.body), fuzzToken)
			if c.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, c.want)
			}
		})
	}
}

func TestParseRequestErrorsNeverCarryTheToken(t *testing.T) {
	_, err := ParseRequest([]byte(`{"token":"`+fuzzToken[:42]+`B"}`), fuzzToken)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), fuzzToken[:20])
}

func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":1,"token":"` + fuzzToken + `","tool":"read","params":{"path":"a.txt","limit":5}}`,
		`{"token":"` + fuzzToken + `","tool":"webfetch","params":null}`,
		`{"token":"short","tool":"read"}`,
		`{"token":null}`,
		`[{"token":"` + fuzzToken + `"}]`,
		`"just a string"`,
		`{"token":"` + fuzzToken + `","tool":"read","params":{"n":1e400}}`,
		"{\"token\":\"" + fuzzToken + "\",\"tool\":\"\xff\"}",
	} {
		f.Add([]byte(seed), fuzzToken)
	}
	f.Fuzz(func(t *testing.T, body []byte, token string) {
		req, err := ParseRequest(body, token)
		if err != nil {
			auth, invalid := errors.Is(err, ErrAuth), errors.Is(err, ErrInvalid)
			if auth == invalid {
				t.Fatalf("error is neither or both sentinels: %v", err)
			}
			if invalid {
				assertTokenMatched(t, body, token)
			}
			return
		}
		assertTokenMatched(t, body, token)
		if req.Params == nil {
			t.Fatal("accepted request without params map")
		}
	})
}

// assertTokenMatched checks independently that body carries token.
func assertTokenMatched(t *testing.T, body []byte, token string) {
	t.Helper()
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		t.Fatalf("authenticated an undecodable body: %v", err)
	}
	got, ok := fields["token"].(string)
	if token == "" || !ok || got != token {
		t.Fatalf("authenticated token %q against %q", fields["token"], token)
	}
}
