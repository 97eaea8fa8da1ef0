package proc

import "unicode/utf8"

// maxPending bounds what the sanitizer carries from one chunk to the next:
// an unfinished UTF-8 sequence (at most 3 bytes) or an unfinished ANSI CSI
// sequence. A CSI sequence longer than this is not treated as one, so the
// carry, and therefore memory, stays bounded whatever the child writes.
const maxPending = 64

const replacement = "\uFFFD"

// sanitizer cleans a byte stream for a model to read, chunk by chunk.
// The rules (README.md, The result), applied to the stream as
// a whole so that the result never depends on where chunk boundaries fall:
//   - ANSI CSI sequences, ESC '[' then digits or ';' then one ASCII letter,
//     at most maxPending bytes in all, are removed;
//   - control bytes other than '\t' and '\n' are removed, DEL included; in
//     particular every '\r' goes, which turns "\r\n" into "\n";
//   - every byte that does not belong to a valid UTF-8 sequence becomes
//     U+FFFD, so invalid input never cuts the rest of a chunk.
//
// The zero value is ready to use.
type sanitizer struct {
	pend [maxPending]byte
	n    int
}

// append sanitizes src, appends the result to dst and returns it. Bytes
// that might still turn out to be part of a sequence are kept back until
// the next call or flush.
func (s *sanitizer) append(dst, src []byte) []byte {
	i := 0
	for s.n > 0 && i < len(src) {
		// Re-scan the carry with one more byte: it either resolves or
		// stays pending, and it is at most maxPending bytes long.
		var tmp [maxPending + 1]byte
		k := copy(tmp[:], s.pend[:s.n])
		tmp[k] = src[i]
		i++
		s.n = 0
		dst = s.scan(dst, tmp[:k+1], false)
	}
	return s.scan(dst, src[i:], false)
}

// flush ends the stream: whatever is still pending is resolved as if no
// more bytes could follow (an unfinished UTF-8 sequence becomes U+FFFD per
// byte, an unfinished CSI sequence loses its ESC and is kept as text).
func (s *sanitizer) flush(dst []byte) []byte {
	if s.n == 0 {
		return dst
	}
	var tmp [maxPending]byte
	k := copy(tmp[:], s.pend[:s.n])
	s.n = 0
	return s.scan(dst, tmp[:k], true)
}

// SanitizeString is s as a complete stream.
func SanitizeString(s string) string {
	if cleanRun([]byte(s)) == len(s) {
		return s
	}
	var z sanitizer
	return string(z.flush(z.append(make([]byte, 0, len(s)), []byte(s))))
}

// plain marks the bytes kept as they are: printable ASCII, tab, newline.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x7f; b++ {
		t[b] = true
	}
	t['\t'], t['\n'] = true, true
	return t
}()

// cleanRun returns how many leading bytes of p need no change: plain
// ASCII and complete, valid UTF-8 sequences.
func cleanRun(p []byte) int {
	j := 0
	for j < len(p) {
		c := p[j]
		if plain[c] {
			j++
			continue
		}
		if c < utf8.RuneSelf || !utf8.FullRune(p[j:]) {
			break
		}
		r, size := utf8.DecodeRune(p[j:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		j += size
	}
	return j
}

func (s *sanitizer) scan(dst, src []byte, final bool) []byte {
	i := 0
	for i < len(src) {
		if n := cleanRun(src[i:]); n > 0 {
			dst = append(dst, src[i:i+n]...)
			i += n
			continue
		}
		// src[i] is ESC, another control byte, invalid UTF-8, or the
		// start of a sequence the chunk ends in the middle of.
		switch b := src[i]; {
		case b == 0x1b:
			switch n := matchCSI(src[i:]); {
			case n > 0:
				i += n
			case n == csiPending && !final:
				s.n = copy(s.pend[:], src[i:])
				return dst
			default:
				// Not a CSI sequence: the ESC is a control byte and goes;
				// what follows is ordinary text.
				i++
			}
		case b < utf8.RuneSelf:
			i++ // other C0 controls, '\r' and DEL
		case !final && !utf8.FullRune(src[i:]):
			s.n = copy(s.pend[:], src[i:])
			return dst
		default:
			// Invalid here (cleanRun took every valid sequence), or an
			// unfinished one at the end of the stream.
			dst = append(dst, replacement...)
			i++
		}
	}
	return dst
}

const (
	csiFailed  = 0
	csiPending = -1
)

// matchCSI reports the length of the CSI sequence p starts with (p[0] is
// ESC), csiFailed if p cannot start one, or csiPending if p ends before
// that can be decided.
func matchCSI(p []byte) int {
	if len(p) < 2 {
		return csiPending
	}
	if p[1] != '[' {
		return csiFailed
	}
	for k := 2; k < maxPending; k++ {
		if k == len(p) {
			return csiPending
		}
		c := p[k]
		switch {
		case (c >= '0' && c <= '9') || c == ';':
		case (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'):
			return k + 1
		default:
			return csiFailed
		}
	}
	return csiFailed
}
