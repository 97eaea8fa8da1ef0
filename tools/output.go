package tools

import (
	"fmt"
	"strconv"
	"strings"
)

// output accumulates result lines up to maxOutputBytes; once full it
// refuses further lines so the tool can stop and say why.
type output struct {
	b     strings.Builder
	limit int
	full  bool
}

func newOutput() *output { return &output{limit: maxOutputBytes} }

// line appends s and a newline, or reports false (and marks the output
// full) when that would pass the limit.
func (o *output) line(s string) bool {
	if o.full || o.b.Len()+len(s)+1 > o.limit {
		o.full = true
		return false
	}
	o.b.WriteString(s)
	o.b.WriteByte('\n')
	return true
}

// numbered appends a read line: the number right-aligned in six columns,
// a tab, the text (cat -n's layout).
func (o *output) numbered(n int, text string) bool {
	var num [20]byte
	digits := strconv.AppendInt(num[:0], int64(n), 10)
	pad := max(0, 6-len(digits))
	if o.full || o.b.Len()+pad+len(digits)+1+len(text)+1 > o.limit {
		o.full = true
		return false
	}
	for range pad {
		o.b.WriteByte(' ')
	}
	o.b.Write(digits)
	o.b.WriteByte('\t')
	o.b.WriteString(text)
	o.b.WriteByte('\n')
	return true
}

// grow presizes the buffer, within the limit.
func (o *output) grow(n int) { o.b.Grow(min(n, o.limit)) }

// fullNote is the note for a result cut by the byte limit.
func (o *output) fullNote() string {
	return fmt.Sprintf("[output capped at %d bytes]", o.limit)
}

// finish returns the text with notes appended on their own lines and no
// trailing newline. The notes go into the same buffer, so a full result
// is not copied once per note.
func (o *output) finish(notes ...string) string {
	for _, n := range notes {
		if n != "" {
			o.b.WriteString(n)
			o.b.WriteByte('\n')
		}
	}
	return strings.TrimSuffix(o.b.String(), "\n")
}
