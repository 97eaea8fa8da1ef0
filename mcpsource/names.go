package mcpsource

import (
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/executecode/executecode/tools"
)

// identifierPart turns s into the characters of an ASCII identifier:
// every other byte (a hyphen, a dot, a slash, any non-ASCII character)
// becomes an underscore.
func identifierPart(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c < unicode.MaxASCII && (unicode.IsLetter(c) || unicode.IsDigit(c)), c == '_':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// paramName is the keyword argument a schema property becomes: its name
// when usable, else one made usable. Leading underscores go (the stub's
// private names start with one), a name that would start with a digit
// or is empty gets an "arg" prefix, and a keyword (or TypeError) gets an
// underscore appended, as PEP 8 advises ("from" becomes "from_").
func paramName(s string) string {
	if tools.UsableParam(s) {
		return s
	}
	n := strings.TrimLeft(identifierPart(s), "_")
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		n = "arg_" + n
	}
	n = strings.TrimRight(n, "_")
	if !tools.UsableParam(n) {
		n += "_"
	}
	return n
}

// assign names each of originals with name(original), unique among
// themselves and against taken. An original whose name needed no change
// keeps it; the others are settled in ascending order of their original,
// and one whose name is already given gets "_2", "_3" and so on. The
// result maps each original to its name.
func assign(originals []string, name func(string) string, taken []string) map[string]string {
	out := make(map[string]string, len(originals))
	used := map[string]bool{}
	for _, t := range taken {
		used[t] = true
	}
	sorted := slices.Clone(originals)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var changed []string
	for _, o := range sorted {
		if n := name(o); n == o && !used[n] {
			out[o], used[n] = n, true
		} else {
			changed = append(changed, o)
		}
	}
	for _, o := range changed {
		base := name(o)
		n := base
		for i := 2; used[n]; i++ {
			n = base + "_" + strconv.Itoa(i)
		}
		out[o], used[n] = n, true
	}
	return out
}

// maxDescription bounds the one line a tool's description becomes in the
// model's tool description, which every call's prompt carries.
const maxDescription = 400

// oneLine is a server's description as the one line a spec shows: runs
// of white space become one space, other control and format characters
// go, and a long text is cut at a word boundary with an ellipsis. An
// empty result becomes fallback.
func oneLine(s, fallback string) string {
	var b strings.Builder
	space := false
	for _, c := range s {
		switch {
		case unicode.IsSpace(c):
			space = true
			continue
		case !unicode.IsGraphic(c):
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(c)
	}
	out := b.String()
	if out == "" {
		return fallback
	}
	if r := []rune(out); len(r) > maxDescription {
		cut := string(r[:maxDescription])
		if i := strings.LastIndexByte(cut, ' '); i > maxDescription/2 {
			cut = cut[:i]
		}
		out = strings.TrimRight(cut, " ,;:.") + "…"
	}
	return out
}
