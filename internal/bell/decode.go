package bell

// The request bell's bytes (docs/protocol.md, Doorbells). A shim that
// published a request rings with the request's name, the part of
// req-<id>-<mac>.json between "req-" and ".json", ended by a newline:
//
//	7-0123456789abcdef0123456789abcdef\n
//
// Any other byte is a plain ring, "look at the directory". The bytes come
// from the script, so nothing here is believed: a name is at most a hint
// of which file to open, checked by the pump exactly as a listed one, and
// everything that is not a well-formed name asks for a listing, which is
// what every ring meant before names.

// MaxName is the longest name a record may carry: a sign, the 19 digits of
// the largest id, a dash and a 32-digit MAC fit with room to spare. A
// longer record is no name the shim writes; it is a plain ring.
const MaxName = 64

// nameEnd ends a named record.
const nameEnd = '\n'

// nameByte reports whether c may appear in a name: the digits and sign of
// an id, the dash before the MAC and the MAC's lowercase hex. No name
// can hold a path separator, a dot or a NUL, so a file name made from one
// stays inside its directory.
func nameByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-' || c == '+'
}

// Decoder splits the request bell's byte stream into names and plain
// rings. A record may arrive split across reads (a reader takes what the
// pipe holds, up to its buffer), so the record in progress is kept
// between Feeds, never more than MaxName bytes of it: memory is bounded
// whatever the script writes.
type Decoder struct {
	rec [MaxName]byte
	n   int
	// overlong says the record in progress passed MaxName: its bytes are
	// dropped up to its end, and it has already counted as a plain ring.
	overlong bool
}

// Feed decodes p. It calls name with each complete, well-formed name (the
// slice is valid only during the call) and reports whether p held
// anything else: a plain ring, a malformed or empty record, or one that
// grew past MaxName. A name's bytes that are still incomplete at the end
// of p wait for the next Feed.
func (d *Decoder) Feed(p []byte, name func([]byte)) (look bool) {
	for _, c := range p {
		switch {
		case c == nameEnd:
			switch {
			case d.overlong:
				// Counted when it grew too long.
			case d.n == 0:
				look = true // an empty record is a plain ring
			default:
				name(d.rec[:d.n])
			}
			d.n, d.overlong = 0, false
		case !nameByte(c):
			// A plain ring; it also ends whatever record was in
			// progress, which no shim would have broken off.
			look = true
			d.n, d.overlong = 0, false
		case d.overlong:
		case d.n == MaxName:
			look = true
			d.n, d.overlong = 0, true
		default:
			d.rec[d.n] = c
			d.n++
		}
	}
	return look
}
