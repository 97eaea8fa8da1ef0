package proc

import (
	"bytes"
	"slices"
)

// Scrubber replaces fixed strings (a run's host paths and its bridge
// token) with canonical names, in whole strings and in streams. Where
// several patterns match at one position the longest wins, so a
// directory's own path never shadows the path of a file inside it. It is
// immutable once built and safe for concurrent use; the nil *Scrubber
// replaces nothing.
//
// As a stream, output is scrubbed before it is truncated or spilled: a
// pattern split across any number of writes is still replaced, because
// the stream holds back at most (longest pattern - 1) bytes, and only
// while they might still become a match. Held-back bytes start where a
// pattern starts, so on valid UTF-8 input (the sanitizer's output) the
// bytes released never end inside a character.
type Scrubber struct {
	// index maps a first byte to 1 + its bucket in buckets; 0 is none.
	index   [256]uint8
	buckets []scrubBucket
	// firsts are the distinct first bytes, when few enough to find with
	// bytes.IndexByte, which is much faster than a byte loop.
	firsts  []byte
	longest int
}

type scrubPattern struct{ old, new string }

// scrubBucket holds the patterns of one first byte, longest first, and
// the second bytes they have: most candidates (a '/' in a listing of
// other paths) fail on that one table lookup.
type scrubBucket struct {
	pats   []scrubPattern
	second [256]bool
	// single is the bucket's one-byte pattern, if it has one.
	single *scrubPattern
}

// maxIndexedFirsts bounds the first bytes found with IndexByte; more fall
// back to the table loop. Paths share '/', so a run's patterns have two.
const maxIndexedFirsts = 4

// denseScan is how far the table loop looks before IndexByte takes over.
const denseScan = 16

// NewScrubber builds a Scrubber from old, new pairs. Empty olds are
// skipped; of two equal olds the first counts. A trailing unpaired
// argument is ignored.
func NewScrubber(pairs ...string) *Scrubber {
	s := &Scrubber{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(pairs); i += 2 {
		old, repl := pairs[i], pairs[i+1]
		if old == "" || seen[old] {
			continue
		}
		seen[old] = true
		b := s.index[old[0]]
		if b == 0 {
			if len(s.buckets) == 255 {
				continue // cannot happen with a run's dozen patterns
			}
			s.buckets = append(s.buckets, scrubBucket{})
			b = uint8(len(s.buckets))
			s.index[old[0]] = b
			s.firsts = append(s.firsts, old[0])
		}
		bucket := &s.buckets[b-1]
		bucket.pats = append(bucket.pats, scrubPattern{old, repl})
		if len(old) > 1 {
			bucket.second[old[1]] = true
		}
		s.longest = max(s.longest, len(old))
	}
	for k := range s.buckets {
		// Longest first: at a position the first full match is the
		// longest, and every pattern that could still grow into a
		// longer match is looked at before it.
		b := &s.buckets[k]
		slices.SortStableFunc(b.pats, func(a, b scrubPattern) int { return len(b.old) - len(a.old) })
		if last := &b.pats[len(b.pats)-1]; len(last.old) == 1 {
			b.single = last
		}
	}
	if len(s.firsts) > maxIndexedFirsts {
		s.firsts = nil
	}
	if len(s.buckets) == 0 {
		return nil
	}
	return s
}

// String returns text with every pattern replaced.
func (s *Scrubber) String(text string) string {
	if s == nil || len(text) == 0 {
		return text
	}
	out, _ := s.scan(make([]byte, 0, len(text)), []byte(text), true)
	return string(out)
}

// scan appends buf to dst with every match replaced. Unless final, it
// stops at the first position where a pattern may begin that buf ends
// too early to decide, and returns that position: the caller carries
// buf[at:] over to the next call.
func (s *Scrubber) scan(dst, buf []byte, final bool) (out []byte, at int) {
	var next [maxIndexedFirsts]int
	for k := range next {
		next[k] = -1
	}
	emitted := 0
	for i := 0; i < len(buf); {
		j := i
		if s.index[buf[j]] == 0 {
			if j = s.candidate(buf, i, &next); j == len(buf) {
				break
			}
		}
		if b := &s.buckets[s.index[buf[j]]-1]; j+1 < len(buf) && !b.second[buf[j+1]] && b.single == nil {
			i = j + 1 // the common miss, decided without a call
			continue
		}
		p, pending := s.matchAt(buf[j:], final)
		switch {
		case pending:
			return append(dst, buf[emitted:j]...), j
		case p == nil:
			i = j + 1
		default:
			dst = append(dst, buf[emitted:j]...)
			dst = append(dst, p.new...)
			i = j + len(p.old)
			emitted = i
		}
	}
	return append(dst, buf[emitted:]...), len(buf)
}

// candidate returns the first position >= i holding a pattern's first
// byte, or len(buf). next caches, per first byte, the last position found.
func (s *Scrubber) candidate(buf []byte, i int, next *[maxIndexedFirsts]int) int {
	// Candidates close together ('/' in a listing of paths) are found
	// faster by the table than by a call per candidate.
	end := len(buf)
	if s.firsts != nil {
		end = min(end, i+denseScan)
	}
	for ; i < end; i++ {
		if s.index[buf[i]] != 0 {
			return i
		}
	}
	if i == len(buf) {
		return i
	}
	best := len(buf)
	for k, c := range s.firsts {
		if next[k] < i {
			if n := bytes.IndexByte(buf[i:], c); n >= 0 {
				next[k] = i + n
			} else {
				next[k] = len(buf)
			}
		}
		best = min(best, next[k])
	}
	return best
}

// matchAt returns the longest pattern rest starts with, or reports
// pending when rest is a proper prefix of a longer pattern and more
// input may follow.
func (s *Scrubber) matchAt(rest []byte, final bool) (*scrubPattern, bool) {
	bucket := &s.buckets[s.index[rest[0]]-1]
	if len(rest) > 1 && !bucket.second[rest[1]] {
		return bucket.single, false
	}
	for k := range bucket.pats {
		p := &bucket.pats[k]
		if len(rest) >= len(p.old) {
			if string(rest[:len(p.old)]) == p.old {
				return p, false
			}
			continue
		}
		if !final && p.old[:len(rest)] == string(rest) {
			return nil, true
		}
	}
	return nil, false
}

// scrubStream applies a Scrubber to a stream written in pieces.
type scrubStream struct {
	s      *Scrubber
	carry  []byte
	joined []byte
}

// append scrubs src as the continuation of everything before it and
// appends what is decided to dst.
func (st *scrubStream) append(dst, src []byte) []byte {
	buf := src
	if len(st.carry) > 0 {
		st.joined = append(append(st.joined[:0], st.carry...), src...)
		buf = st.joined
	}
	dst, at := st.s.scan(dst, buf, false)
	st.carry = append(st.carry[:0], buf[at:]...)
	return dst
}

// flush ends the stream: what was held back can no longer grow into a
// match.
func (st *scrubStream) flush(dst []byte) []byte {
	if len(st.carry) == 0 {
		return dst
	}
	dst, _ = st.s.scan(dst, st.carry, true)
	st.carry = st.carry[:0]
	return dst
}
