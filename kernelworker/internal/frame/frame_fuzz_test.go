package frame

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParser feeds arbitrary bytes whole and split in two. The parser must
// never panic, must agree with itself whatever the split (both accept with
// the same frames, or both reject), and must only deliver frames within
// the protocol's bounds.
func FuzzParser(f *testing.F) {
	f.Add([]byte(conversation), uint16(7))
	f.Add([]byte(fr(`{"v":1,"type":"ready","pid":1}`)+"garbage\n"), uint16(3))
	f.Add([]byte(fr(`{"v":1.0,"type":"ready"}`)), uint16(20))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		at := int(cut) % (len(data) + 1)

		var whole Parser
		want, wantErr := whole.Feed(data)

		var split Parser
		a, errA := split.Feed(data[:at])
		var b []Frame
		errB := errA
		if errA == nil {
			b, errB = split.Feed(data[at:])
		}
		if wantErr != nil {
			require.Error(t, errB, "whole input rejected (%v) but split at %d accepted", wantErr, at)
			return
		}
		require.NoError(t, errB, "whole input accepted but split at %d rejected", at)
		require.Equal(t, len(want), len(a)+len(b))
		for i, fr := range append(a, b...) {
			require.Equal(t, want[i].Type, fr.Type)
			require.Equal(t, want[i].ID, fr.ID)
			require.Equal(t, string(want[i].Data), string(fr.Data))
			require.LessOrEqual(t, len(fr.Data), MaxStreamChunk)
			if fr.Type == Stream {
				require.NotEmpty(t, fr.Data)
			}
		}
	})
}

// FuzzStreamFastPath: whatever body the fast path takes, the general
// decoding must take too and yield the very same object, so the parser's
// answer never depends on which way a frame went. Whole conversations
// also get the same frames and errors from a parser without the fast path.
func FuzzStreamFastPath(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"stream","id":"c1","stream":"stdout","data":"aGk="}`))
	f.Add([]byte(`{"v":1,"type":"stream","id":"c-7 x","stream":"stderr","data":""}`))
	f.Add([]byte(`{"v":1,"type":"stream","id":"c\u0041","stream":"stdout","data":"aGk="}`))
	f.Add([]byte(`{"v":1,"type":"stream","id":"c1","stream":"stdout","data":"aGk="} `))
	f.Add([]byte(`{"v":1,"type":"stream","id":"c1","stream":"stdout","data":"aG\nk="}`))
	f.Add([]byte(conversation))
	f.Fuzz(func(t *testing.T, body []byte) {
		if fast, ok := streamFastPath(body); ok {
			slow, err := decodeObject(body)
			require.NoError(t, err, "the fast path took a body the general decoding refuses")
			require.Equal(t, slow, fast)
		}
		// After a started frame for c1, so a stream frame can be valid.
		in := append([]byte(fr(`{"v":1,"type":"ready"}`)+fr(`{"v":1,"type":"started","id":"c1"}`)+Prefix), body...)
		in = append(in, '\n')
		var withFast, without Parser
		without.slowOnly = true
		a, errA := withFast.Feed(in)
		b, errB := without.Feed(in)
		require.Equal(t, errB, errA)
		require.Equal(t, b, a)
	})
}

// FuzzCellFastPath holds the started and done fast path to the general
// decoding: the same object for every body it takes, and the same frames
// and errors from a parser with it as from one without.
func FuzzCellFastPath(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"started","id":"c1"}`))
	f.Add([]byte(`{"v":1,"type":"done","id":"c1","dropped":0}`))
	f.Add([]byte(`{"v":1,"type":"done","id":"c1","dropped":0012}`))
	f.Add([]byte(`{"v":1,"type":"done","id":"c1","dropped":-1}`))
	f.Add([]byte(`{"v":1,"type":"done","id":"c1","dropped":1e3}`))
	f.Add([]byte(`{"v":1,"type":"done","id":"c1","dropped":99999999999999999999}`))
	f.Add([]byte(`{"v":1,"type":"done","id":"c\u0031","dropped":3}`))
	f.Add([]byte(`{"v":1,"type":"started","id":"c1"} `))
	f.Add([]byte(`{"v":1,"type":"started","id":"c1","id":"c2"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if fast, ok := cellFastPath(body); ok {
			slow, err := decodeObject(body)
			require.NoError(t, err, "the fast path took a body the general decoding refuses")
			require.Equal(t, slow, fast)
		}
		// After a ready and, for a done, the started frame of c1.
		head := fr(`{"v":1,"type":"ready"}`)
		if bytes.Contains(body, []byte(`"done"`)) {
			head += fr(`{"v":1,"type":"started","id":"c1"}`)
		}
		in := append([]byte(head+Prefix), body...)
		in = append(in, '\n')
		var withFast, without Parser
		without.slowOnly = true
		a, errA := withFast.Feed(in)
		b, errB := without.Feed(in)
		require.Equal(t, errB, errA)
		require.Equal(t, b, a)
	})
}
