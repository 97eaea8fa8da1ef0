package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What the decoder answers is not held back for the line that follows
// when that line has not fully arrived: the answer goes out before serve
// waits for the rest.
func TestServeAnswersABadLineWhileTheNextIsHalfSent(t *testing.T) {
	p := startServe(t)
	_, err := io.WriteString(p.in, `{"id":1,"op":"nop"}`+"\n"+`{"id":2,"op":`)
	require.NoError(t, err)
	a := p.answer()
	assert.Equal(t, 1.0, a["id"])
	assert.Equal(t, `unknown op "nop"`, a["error"])
	_, err = io.WriteString(p.in, `"snapshot"}`+"\n")
	require.NoError(t, err)
	a = p.answer()
	assert.Equal(t, 2.0, a["id"])
	assert.Contains(t, a, "snapshot")
}

// A flood of lines the decoder answers, sent faster than the client
// reads: every answer arrives, once, in the order of the lines, each
// naming its line's id, and the good line inside the flood is answered
// in its place.
func TestServeAnswersAFloodOfBadLinesInOrder(t *testing.T) {
	p := startServe(t)
	const n = 20000
	var flood strings.Builder
	for i := range n {
		if i == n/2 {
			fmt.Fprintf(&flood, `{"id":%d,"op":"snapshot"}`+"\n", i)
			continue
		}
		fmt.Fprintf(&flood, `{"id":%d,"op":"nop","pad":"%s"}`+"\n", i, strings.Repeat("p", i%64))
	}
	sent := make(chan error, 1)
	go func() {
		_, err := io.WriteString(p.in, flood.String())
		sent <- err
	}()
	time.Sleep(200 * time.Millisecond) // the client is not reading yet
	for i := range n {
		a := p.answer()
		require.Equal(t, float64(i), a["id"], "answer %d", i)
		if i == n/2 {
			require.Contains(t, a, "snapshot")
		} else {
			require.Equal(t, `unknown op "nop"`, a["error"])
		}
	}
	require.NoError(t, <-sent)
}
