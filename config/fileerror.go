package config

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// FileError is a configuration file problem. It wraps ErrFile and, when
// there is one, the underlying read or decode error.
type FileError struct {
	Path string
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key; "" when unknown
	Msg  string
	Err  error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("config file ")
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": key ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(oneLine(e.Msg))
	return b.String()
}

func (e *FileError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrFile}
	}
	return []error{ErrFile, e.Err}
}

// oneLine keeps an error on one line: the CLI prints it as one.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func dotted(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = capRunes(p, maxShown)
	}
	return strings.Join(parts, ".")
}

// keyLine finds the line of the first definition of path in a document that
// already decoded cleanly, following table headers, dotted keys and inline
// tables. It returns 0 when the key cannot be found; go-toml's parser
// panics on misuse, so a panic also means "unknown", never a crash.
func keyLine(data []byte, path []string) (line int) {
	defer func() {
		if recover() != nil {
			line = 0
		}
	}()
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, first := keyParts(e.Key())
			table = parts
			if slices.Equal(parts, path) {
				return p.Shape(first.Raw).Start.Line
			}
		case unstable.KeyValue:
			if l := keyValueLine(&p, e, table, path); l > 0 {
				return l
			}
		}
	}
	return 0
}

func keyValueLine(p *unstable.Parser, kv *unstable.Node, prefix, path []string) int {
	parts, first := keyParts(kv.Key())
	full := append(append([]string(nil), prefix...), parts...)
	if slices.Equal(full, path) {
		return p.Shape(first.Raw).Start.Line
	}
	v := kv.Value()
	if v.Kind != unstable.InlineTable || len(full) >= len(path) || !slices.Equal(full, path[:len(full)]) {
		return 0
	}
	it := v.Children()
	for it.Next() {
		if l := keyValueLine(p, it.Node(), full, path); l > 0 {
			return l
		}
	}
	return 0
}

func keyParts(it unstable.Iterator) (parts []string, first *unstable.Node) {
	for it.Next() {
		n := it.Node()
		if first == nil {
			first = n
		}
		parts = append(parts, string(n.Data))
	}
	return parts, first
}

// keyOnLine is the bare key a line starts with ("timeout_ms = = 3" gives
// timeout_ms), so a syntax error can name its key even when go-toml does
// not; "" when the line does not start with one.
func keyOnLine(data []byte, line int) string {
	if line < 1 {
		return ""
	}
	lines := bytes.SplitN(data, []byte("\n"), line+1)
	if len(lines) < line {
		return ""
	}
	text, _, found := strings.Cut(string(lines[line-1]), "=")
	text = strings.TrimSpace(text)
	if !found || text == "" || strings.TrimLeft(text, bareKeyChars) != "" {
		return ""
	}
	return capRunes(text, maxShown)
}

const bareKeyChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-."
