package pump

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
)

// Every file of the bridge that one side writes and the other believes is
// authenticated with the bridge token: a MAC binds the file's kind, its
// number as written and its exact body, so a frame planted by anyone
// without the token (another session's script listing the shared staging
// root, say), or a genuine frame copied under another number or kind,
// fails. See docs/decisions.md for the choice of primitive.
//
// The MAC is HMAC-SHA256 keyed with the token, over
// kind NUL number NUL body, cut to 128 bits and written as 32 lowercase
// hex digits. Script-written files carry it in their name (the body, and
// so the text budget's charge, is unchanged):
//
//	req-<id>-<mac>.json  text-<n>-<mac>.json  notify-<n>-<mac>.json
//	exception-<mac>.json
//
// The pump's responses, whose name the waiting shim must know in
// advance, carry it as the body's first member: {"mac":"<mac>",...}, the
// MAC being over the body without that member.
const (
	// MACLen is the length of a MAC in hex digits.
	MACLen = 32

	KindRequest   = "req"
	KindResponse  = "res"
	KindText      = "text"
	KindNotify    = "notify"
	KindException = "exception"
)

// FrameMAC is the MAC of one bridge file: kind, its number exactly as
// written in its name ("" for the exception record) and its body.
func FrameMAC(token, kind, num string, body []byte) string {
	return macOf(newMAC(token), kind, num, body)
}

func newMAC(token string) hash.Hash { return hmac.New(sha256.New, []byte(token)) }

func macOf(m hash.Hash, kind, num string, body []byte) string {
	m.Reset()
	var sep = [1]byte{0}
	m.Write([]byte(kind))
	m.Write(sep[:])
	m.Write([]byte(num))
	m.Write(sep[:])
	m.Write(body)
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0])[:MACLen/2])
}

// validMAC reports, in constant time, whether mac authenticates the file.
// An empty token authenticates nothing.
func validMAC(token, kind, num string, body []byte, mac string) bool {
	if token == "" || len(mac) != MACLen {
		return false
	}
	want := FrameMAC(token, kind, num, body)
	return subtle.ConstantTimeCompare([]byte(want), []byte(mac)) == 1
}

// FrameName is the name a script publishes a frame of kind under:
// <kind>-<num>-<mac>.json, or exception-<mac>.json for the exception
// record (num "").
func FrameName(kind, num, mac string) string {
	if num == "" {
		return kind + "-" + mac + jsonSuffix
	}
	return kind + "-" + num + "-" + mac + jsonSuffix
}

// RequestName is the file a script publishes call id under, body being
// the request's exact bytes.
func RequestName(token string, id int64, body []byte) string {
	num := strconv.FormatInt(id, 10)
	return FrameName(KindRequest, num, FrameMAC(token, KindRequest, num, body))
}

// frameName is a script-written file name taken apart: kind-num-mac.json.
// The name is untrusted input; nothing here is believed before the MAC is
// checked against the body.
type frameName struct {
	num string // the number as written; "" when the name has none
	n   int64
	// numbered says num parses as a protocol number (n is meaningful).
	numbered bool
	mac      string // "" when the name carries none
}

// parseFrameName splits name, which must start with prefix ("req-",
// "text-", "notify-" or "exception") and end in ".json", into number and
// MAC. The MAC is the last dash-separated field when it is exactly 32
// lowercase hex digits; everything between prefix and MAC is the number.
// A name without a MAC parses (the caller refuses it as unauthenticated);
// ok is false only when the name is not of the family at all.
func parseFrameName(name, prefix string) (f frameName, ok bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, jsonSuffix) || len(name) < len(prefix)+len(jsonSuffix) {
		return frameName{}, false
	}
	mid := name[len(prefix) : len(name)-len(jsonSuffix)]
	if i := strings.LastIndexByte(mid, '-'); i >= 0 && len(mid)-i-1 == MACLen && isLowerHex(mid[i+1:]) {
		f.mac, mid = mid[i+1:], mid[:i]
		if i == 0 {
			// "text--<mac>": an empty number, which no writer produces.
			f.num = ""
			return f, true
		}
	}
	f.num = mid
	f.n, f.numbered = parseN(mid)
	return f, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
