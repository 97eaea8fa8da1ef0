package pump

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"sync"
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
	// macLen is the length of a MAC in hex digits.
	macLen = 32

	KindRequest   = "req"
	KindResponse  = "res"
	KindText      = "text"
	KindNotify    = "notify"
	KindException = "exception"
)

// FrameMAC is the MAC of one bridge file: kind, its number exactly as
// written in its name ("" for the exception record) and its body.
func FrameMAC(token, kind, num string, body []byte) string {
	st := macStates.Get().(*macState)
	defer macStates.Put(st)
	return string(st.compute(token, kind, num, body))
}

// validMAC reports, in constant time, whether mac authenticates the file.
// An empty token authenticates nothing.
func validMAC(token, kind, num string, body []byte, mac string) bool {
	if token == "" || len(mac) != macLen {
		return false
	}
	st := macStates.Get().(*macState)
	defer macStates.Put(st)
	return subtle.ConstantTimeCompare(st.compute(token, kind, num, body), []byte(mac)) == 1
}

// macState is a keyed HMAC with its scratch space, kept in a pool: a
// sweep checks and writes several files under one token, and a fresh HMAC
// for each cost a dozen allocations per helper call.
type macState struct {
	token string
	h     hash.Hash
	head  []byte
	sum   [sha256.Size]byte
	hex   [macLen]byte
}

var macStates = sync.Pool{New: func() any { return new(macState) }}

// compute returns the MAC in st's own buffer, valid until st's next use.
func (st *macState) compute(token, kind, num string, body []byte) []byte {
	if st.h == nil || st.token != token {
		st.h, st.token = hmac.New(sha256.New, []byte(token)), token
	} else {
		st.h.Reset()
	}
	st.head = append(append(append(append(st.head[:0], kind...), 0), num...), 0)
	st.h.Write(st.head)
	st.h.Write(body)
	hex.Encode(st.hex[:], st.h.Sum(st.sum[:0])[:macLen/2])
	return st.hex[:]
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
	if i := strings.LastIndexByte(mid, '-'); i >= 0 && len(mid)-i-1 == macLen && isLowerHex(mid[i+1:]) {
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
