package bell

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mac = "0123456789abcdef0123456789abcdef"

// decodeAll feeds chunks in order and returns every name and whether any
// Feed asked for a look.
func decodeAll(chunks ...[]byte) (names []string, look bool) {
	var d Decoder
	for _, c := range chunks {
		if d.Feed(c, func(n []byte) { names = append(names, string(n)) }) {
			look = true
		}
	}
	return names, look
}

func TestDecoderReadsNamesAndPlainRings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		names []string
		look  bool
	}{
		{"one name", "7-" + mac + "\n", []string{"7-" + mac}, false},
		{"two names in one read", "7-" + mac + "\n8-" + mac + "\n", []string{"7-" + mac, "8-" + mac}, false},
		{"the old one-byte ring", "\x00", nil, true},
		{"any byte outside names", "x", nil, true},
		{"an empty record", "\n", nil, true},
		{"a name and a plain ring", "\x017-" + mac + "\n", []string{"7-" + mac}, true},
		{"garbage ends a name in progress", "7-01\xff23\n", []string{"23"}, true},
		{"an unfinished name waits", "7-" + mac, nil, false},
		{"uppercase is no name byte", "7-ABC\n", nil, true},
		{"path bytes are no name bytes", "../../etc/passwd\n", []string{"d"}, true},
		{"a NUL inside a name", "7\x00-" + mac + "\n", []string{"-" + mac}, true},
		{"the longest record", strings.Repeat("1", MaxName) + "\n", []string{strings.Repeat("1", MaxName)}, false},
		{"one byte too long", strings.Repeat("1", MaxName+1) + "\n", nil, true},
		{"a huge number is still only a name", "99999999999999999999999999-" + mac + "\n", []string{"99999999999999999999999999-" + mac}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, look := decodeAll([]byte(tc.in))
			assert.Equal(t, tc.names, names)
			assert.Equal(t, tc.look, look)
		})
	}
}

func TestDecoderJoinsANameSplitAcrossReads(t *testing.T) {
	in := []byte("12-" + mac + "\n13-" + mac + "\n")
	for cut := 0; cut <= len(in); cut++ {
		names, look := decodeAll(in[:cut], in[cut:])
		assert.Equal(t, []string{"12-" + mac, "13-" + mac}, names, "cut at %d", cut)
		assert.False(t, look)
	}
	// Byte by byte.
	var chunks [][]byte
	for i := range in {
		chunks = append(chunks, in[i:i+1])
	}
	names, _ := decodeAll(chunks...)
	assert.Equal(t, []string{"12-" + mac, "13-" + mac}, names)
}

func TestDecoderHoldsNoMoreThanOneRecordOfAnEndlessName(t *testing.T) {
	var d Decoder
	chunk := bytes.Repeat([]byte("1"), 4096)
	looks := 0
	for range 1000 { // 4 MB without a newline
		if d.Feed(chunk, func([]byte) { t.Fatal("no name may come of it") }) {
			looks++
		}
	}
	assert.Equal(t, 1, looks, "an overlong record is one plain ring, not one per read")
	// The next record is read normally once the overlong one ends.
	names, _ := func() ([]string, bool) {
		var got []string
		look := d.Feed([]byte("\n5-"+mac+"\n"), func(n []byte) { got = append(got, string(n)) })
		return got, look
	}()
	assert.Equal(t, []string{"5-" + mac}, names)
}

func TestDecoderNamesAreOnlyNameBytes(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c), byte(c), '\n')
	}
	names, look := decodeAll(all)
	assert.True(t, look)
	for _, n := range names {
		require.LessOrEqual(t, len(n), MaxName)
		for i := 0; i < len(n); i++ {
			assert.True(t, nameByte(n[i]), "%q", n)
		}
	}
	assert.Len(t, names, len("0123456789abcdef+-"))
}

// FuzzDecoder: whatever the script writes, the decoder never panics,
// every name is MaxName bytes of name bytes at most, and how the bytes
// were split into reads changes neither the names nor whether a look was
// asked for.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("7-"+mac+"\n"), 3)
	f.Add([]byte("\x00\x01\n\n"), 1)
	f.Add([]byte(strings.Repeat("9", 100)+"\n1-"+mac+"\n"), 50)
	f.Add([]byte("-+-+\n../x\n"), 0)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		whole, wholeLook := decodeAll(in)
		if cut < 0 {
			cut = -cut
		}
		cut %= len(in) + 1
		split, splitLook := decodeAll(in[:cut], in[cut:])
		if fmt.Sprint(whole) != fmt.Sprint(split) || wholeLook != splitLook {
			t.Fatalf("split at %d changed the result: %q %v vs %q %v", cut, whole, wholeLook, split, splitLook)
		}
		for _, n := range whole {
			if len(n) == 0 || len(n) > MaxName {
				t.Fatalf("name of %d bytes", len(n))
			}
			for i := 0; i < len(n); i++ {
				if !nameByte(n[i]) {
					t.Fatalf("name %q holds %q", n, n[i])
				}
			}
		}
	})
}
