package pump

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
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
		{"valid", `{"id":1,"tool":"read","params":{"path":"a"}}`, nil},
		{"a token in the body is ignored", `{"token":"wrong","tool":"read"}`, nil},
		{"array", `[1,2]`, errInvalid},
		{"not json", `{`, errInvalid},
		{"empty", ``, errInvalid},
		{"invalid utf8", "{\"tool\":\"\xc3\"}", errInvalid},
		{"huge number in params", `{"tool":"read","params":{"n":1e999}}`, errInvalid},
		{"huge integer id", `{"id":123456789012345678901234567890,"tool":"read"}`, nil},
		{"tool object", `{"tool":{}}`, errInvalid},
		{"duplicate tool, last wins", `{"tool":5,"tool":"read"}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			_, err := parseRequest(fuzzToken, "1", FrameMAC(fuzzToken, KindRequest, "1", body), body)
			if c.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, c.want)
			}
		})
	}
}

// Whatever the body, a MAC that is not the body's own under the bridge's
// token is an authentication failure: one byte changed anywhere, another
// number, another kind, another token, no token at all.
func TestParseRequestRefusesEveryMACButTheBodysOwn(t *testing.T) {
	body := []byte(`{"id":1,"tool":"read","params":{}}`)
	good := FrameMAC(fuzzToken, KindRequest, "1", body)
	other := strings.Repeat("B", len(fuzzToken))
	flipped := []byte(good)
	flipped[7] ^= 1
	cases := map[string]struct {
		token, num, mac string
		body            []byte
	}{
		"body changed":         {fuzzToken, "1", good, []byte(`{"id":1,"tool":"read","params":{"x":1}}`)},
		"number changed":       {fuzzToken, "2", good, body},
		"number padded":        {fuzzToken, "01", good, body},
		"kind changed":         {fuzzToken, "1", FrameMAC(fuzzToken, KindText, "1", body), body},
		"another token":        {fuzzToken, "1", FrameMAC(other, KindRequest, "1", body), body},
		"one digit flipped":    {fuzzToken, "1", string(flipped), body},
		"upper case":           {fuzzToken, "1", strings.ToUpper(good), body},
		"no mac":               {fuzzToken, "1", "", body},
		"bridge has no token":  {"", "1", FrameMAC("", KindRequest, "1", body), body},
		"the token as the mac": {fuzzToken, "1", fuzzToken[:macLen], body},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseRequest(c.token, c.num, c.mac, c.body)
			assert.ErrorIs(t, err, errAuth)
		})
	}
	_, err := parseRequest(fuzzToken, "1", good, body)
	assert.NoError(t, err)
}

func TestParseRequestErrorsNeverCarryTheToken(t *testing.T) {
	body := []byte(`{"tool":` + strconv.Quote(fuzzToken) + `}`)
	_, err := parseRequest(fuzzToken, "1", fuzzToken[:macLen], body)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), fuzzToken[:20])
}

// FuzzParseRequest feeds ParseRequest the body's true MAC, or that MAC with
// one character changed when tamper is not zero, so both the refusal and
// the validation of authenticated bodies are explored.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":1,"tool":"read","params":{"path":"a.txt","limit":5}}`,
		`{"tool":"webfetch","params":null}`,
		`[{"tool":"read"}]`,
		`"just a string"`,
		`{"tool":"read","params":{"n":1e400}}`,
		"{\"tool\":\"\xff\"}",
	} {
		f.Add(fuzzToken, "1", []byte(seed), byte(0))
		f.Add(fuzzToken, "-7", []byte(seed), byte(3))
	}
	f.Fuzz(func(t *testing.T, token, num string, body []byte, tamper byte) {
		mac := FrameMAC(token, KindRequest, num, body)
		if tamper != 0 {
			b := []byte(mac)
			i := int(tamper) % len(b)
			b[i] = "0123456789abcdef"[(strings.IndexByte("0123456789abcdef", b[i])+1)%16]
			mac = string(b)
		}
		req, err := parseRequest(token, num, mac, body)
		authentic := tamper == 0 && token != ""
		if err != nil {
			auth, invalid := errors.Is(err, errAuth), errors.Is(err, errInvalid)
			if auth == invalid {
				t.Fatalf("error is neither or both sentinels: %v", err)
			}
			if auth == authentic {
				t.Fatalf("authentic=%v but err=%v", authentic, err)
			}
			return
		}
		if !authentic {
			t.Fatal("accepted a request whose MAC is not its own")
		}
		if req.Params == nil {
			t.Fatal("accepted request without params map")
		}
		assertJSONObject(t, body)
	})
}

// assertJSONObject checks independently that an accepted body is a JSON
// object.
func assertJSONObject(t *testing.T, body []byte) {
	t.Helper()
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || fields == nil {
		t.Fatalf("accepted a body that is not an object: %v", err)
	}
}

func TestParseFrameNameTakesTheLastFieldAsTheMAC(t *testing.T) {
	mac := strings.Repeat("0f", macLen/2)
	cases := []struct {
		name, prefix  string
		num, wantMAC  string
		numbered      bool
		n             int64
		inTheFamilyOf bool
	}{
		{"text-7-" + mac + ".json", textPrefix, "7", mac, true, 7, true},
		{"req--3-" + mac + ".json", reqPrefix, "-3", mac, true, -3, true},
		{"req-007-" + mac + ".json", reqPrefix, "007", mac, true, 7, true},
		{"notify-5.json", notifyPrefix, "5", "", true, 5, true},
		{"text-5-" + strings.ToUpper(mac) + ".json", textPrefix, "5-" + strings.ToUpper(mac), "", false, 0, true},
		{"text-5-" + mac[1:] + ".json", textPrefix, "5-" + mac[1:], "", false, 0, true},
		{"text-" + mac + ".json", textPrefix, mac, "", false, 0, true},
		{"text--" + mac + ".json", textPrefix, "", mac, false, 0, true},
		{"exception-" + mac + ".json", ExceptionPrefix, "", mac, false, 0, true},
		{"exception.json", ExceptionPrefix, "", "", false, 0, true},
		{"text-1-" + mac + ".json.tmp", textPrefix, "", "", false, 0, false},
		{"res-1.json", textPrefix, "", "", false, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, ok := parseFrameName(c.name, c.prefix)
			require.Equal(t, c.inTheFamilyOf, ok)
			if !ok {
				return
			}
			assert.Equal(t, c.num, f.num)
			assert.Equal(t, c.wantMAC, f.mac)
			assert.Equal(t, c.numbered, f.numbered)
			if c.numbered {
				assert.Equal(t, c.n, f.n)
			}
		})
	}
}

// FuzzParseFrameName: any name parses without panicking; a MAC it reports
// is 32 lowercase hex digits and the name is exactly prefix, number and
// MAC put back together; a reported number is a protocol number.
func FuzzParseFrameName(f *testing.F) {
	mac := strings.Repeat("a1", macLen/2)
	for _, seed := range []string{
		"text-1-" + mac + ".json", "notify-12-" + mac + ".json", "req--3-" + mac + ".json",
		"exception-" + mac + ".json", "exception.json", "text-1.json", "text--" + mac + ".json",
		"req-+5-" + mac + "-" + mac + ".json", "text-.json", "text-", ".json",
	} {
		f.Add(seed)
	}
	prefixes := []string{reqPrefix, textPrefix, notifyPrefix, ExceptionPrefix}
	f.Fuzz(func(t *testing.T, name string) {
		for _, prefix := range prefixes {
			fr, ok := parseFrameName(name, prefix)
			if !ok {
				if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, jsonSuffix) && len(name) >= len(prefix)+len(jsonSuffix) {
					t.Fatalf("%q is of the %q family but was not parsed", name, prefix)
				}
				continue
			}
			rebuilt := prefix + fr.num + jsonSuffix
			if fr.mac != "" {
				if len(fr.mac) != macLen || !isLowerHex(fr.mac) {
					t.Fatalf("%q: MAC %q is not 32 lowercase hex digits", name, fr.mac)
				}
				rebuilt = prefix + fr.num + "-" + fr.mac + jsonSuffix
			}
			if rebuilt != name {
				t.Fatalf("%q parsed as num %q mac %q", name, fr.num, fr.mac)
			}
			if n, numbered := parseN(fr.num); numbered != fr.numbered || (numbered && n != fr.n) {
				t.Fatalf("%q: number %q parsed as (%d, %v)", name, fr.num, fr.n, fr.numbered)
			}
			if fr.mac != "" && fr.num != "" && strings.HasSuffix(prefix, "-") {
				if back, _ := parseFrameName(FrameName(strings.TrimSuffix(prefix, "-"), fr.num, fr.mac), prefix); back != fr {
					t.Fatalf("%q: FrameName does not round-trip: %+v vs %+v", name, back, fr)
				}
			}
		}
	})
}
