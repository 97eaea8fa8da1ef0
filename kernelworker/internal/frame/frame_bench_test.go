package frame

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// BenchmarkParserStream feeds 1 MiB of cell output as the runner frames it
// (64 KiB chunks, base64) in 64 KiB reads, with the stream fast path and,
// as the baseline in the same run, without it.
func BenchmarkParserStream(b *testing.B) {
	head := fr(`{"v":1,"type":"ready"}`) + fr(`{"v":1,"type":"started","id":"c1"}`)
	chunk := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("output line\n"), MaxStreamChunk/12))
	var body strings.Builder
	for range (1 << 20) / MaxStreamChunk {
		body.WriteString(fr(`{"v":1,"type":"stream","id":"c1","stream":"stdout","data":"` + chunk + `"}`))
	}
	stream := []byte(body.String())
	for _, v := range []struct {
		name     string
		slowOnly bool
	}{{"fast", false}, {"general", true}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				p := Parser{slowOnly: v.slowOnly}
				if _, err := p.Feed([]byte(head)); err != nil {
					b.Fatal(err)
				}
				for off := 0; off < len(stream); off += 64 << 10 {
					if _, err := p.Feed(stream[off:min(off+64<<10, len(stream))]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
