package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/executecode/executecode/tools"
	"github.com/rs/zerolog"
)

// issue is a raw value that was ignored, defaulted or clamped.
type issue struct {
	c   candidate
	why string
}

type warner struct{ log *zerolog.Logger }

// report logs each issue of key once, with the value finally used: the
// warning is only useful if it says what happened instead.
func (w *warner) report(key string, issues []issue, using string) {
	using = capRunes(strings.ToValidUTF8(using, "\uFFFD"), maxShown)
	for _, is := range issues {
		val := shown(is.c.value)
		w.log.Warn().Str("key", key).Str("source", is.c.label).Str("value", val).Str("using", using).
			Msgf("config: %s = %s (%s) %s; using %s", key, val, is.c.label, is.why, using)
	}
}

func resolveBool(cs []candidate) (v, explicit bool, issues []issue) {
	for _, c := range cs {
		if b, ok := parseBool(c.value); ok {
			return b, true, issues
		}
		issues = append(issues, issue{c, "is not true, false, 1 or 0"})
	}
	return false, false, issues
}

// resolveDeclaredInt: the first value that is an integer wins, clamped up
// to 1; a malformed value falls through to the next layer.
func resolveDeclaredInt(cs []candidate, def int64) (int64, []issue) {
	var issues []issue
	for _, c := range cs {
		n, ok, sat := parseInt(c.value)
		switch {
		case !ok:
			issues = append(issues, issue{c, "is not an integer"})
			continue
		case n < 1:
			issues = append(issues, issue{c, "is below 1, clamped"})
			n = 1
		case sat:
			issues = append(issues, issue{c, "is out of range, clamped"})
		}
		return n, issues
	}
	return def, issues
}

// resolveBound: the first positive integer wins; anything else at a layer
// is skipped, never passed through.
func resolveBound(cs []candidate, def int64) (int64, []issue) {
	var issues []issue
	for _, c := range cs {
		n, ok, sat := parseInt(c.value)
		switch {
		case !ok:
			issues = append(issues, issue{c, "is not an integer"})
			continue
		case n < 1:
			issues = append(issues, issue{c, "is not a positive integer"})
			continue
		case sat:
			issues = append(issues, issue{c, "is out of range, clamped"})
		}
		return n, issues
	}
	return def, issues
}

// resolveLimit: the first integer >= 0 wins (0 = no limit); a negative or
// malformed value is skipped.
func resolveLimit(cs []candidate, def int64) (int64, []issue) {
	var issues []issue
	for _, c := range cs {
		n, ok, sat := parseInt(c.value)
		switch {
		case !ok:
			issues = append(issues, issue{c, "is not an integer"})
			continue
		case n < 0:
			issues = append(issues, issue{c, "is negative (0 means no limit)"})
			continue
		case sat:
			issues = append(issues, issue{c, "is out of range, clamped"})
		}
		return n, issues
	}
	return def, issues
}

// resolveWarmCount: the first integer >= 0 wins, clamped down to
// MaxWarmInterpreters; a negative or malformed value is skipped.
func resolveWarmCount(cs []candidate, def int64) (int64, []issue) {
	var issues []issue
	for _, c := range cs {
		n, ok, _ := parseInt(c.value)
		switch {
		case !ok:
			issues = append(issues, issue{c, "is not an integer"})
			continue
		case n < 0:
			issues = append(issues, issue{c, "is negative (0 keeps none warm)"})
			continue
		case n > MaxWarmInterpreters:
			issues = append(issues, issue{c, fmt.Sprintf("is above %d, clamped", MaxWarmInterpreters)})
			n = MaxWarmInterpreters
		}
		return n, issues
	}
	return def, issues
}

// resolveMode: the highest layer that sets kernel_mode decides, even when
// its value is malformed, so a typo can never fall through to a lower layer
// that enables persistence. Only the exact string "session" selects it.
func resolveMode(cs []candidate) (Mode, []issue) {
	if len(cs) == 0 {
		return PerCall, nil
	}
	c := cs[0]
	s, _ := c.value.(string)
	switch s {
	case string(Session):
		return Session, nil
	case string(PerCall):
		return PerCall, nil
	}
	return PerCall, []issue{{c, "is not per_call or session"}}
}

// resolveSandbox: the first valid value wins ("" is an older spelling of
// none); an invalid one falls through, which can only keep a lower
// layer's confinement, never drop it.
func resolveSandbox(cs []candidate) (string, []issue) {
	var issues []issue
	for _, c := range cs {
		s, isStr := c.value.(string)
		switch {
		case isStr && s == "":
			return SandboxNone, issues
		case isStr && (s == SandboxNone || s == SandboxLandlock):
			return s, issues
		}
		issues = append(issues, issue{c, "is not none or landlock"})
	}
	return SandboxNone, issues
}

// resolveTools: the first layer whose list is non-empty (after trimming
// and dropping empties) wins, then it is filtered to the allowlist keeping
// order and duplicates. No list at all means the full allowlist; a list of
// only unknown names means no helpers.
func resolveTools(cs []candidate, hostTool func(string) bool) ([]string, []issue) {
	kept, found, issues := firstToolList(cs, false, hostTool)
	if !found {
		return slices.Clone(tools.Allowlist), issues
	}
	return kept, issues
}

// resolvePolicyList resolves allow, deny or require_approval like tools,
// but as sets: duplicates are dropped, and no list at all means an empty
// one. NoTools is a silent "nothing". An allow list that named tools but
// kept none of them becomes [NoTools], which allows nothing: dropping it
// to empty would turn a narrowing the user asked for into no restriction
// at all.
func resolvePolicyList(name string, cs []candidate, hostTool func(string) bool) ([]string, []issue) {
	kept, found, issues := firstToolList(cs, true, hostTool)
	switch {
	case !found:
		return []string{}, issues
	case name == "allow" && len(kept) == 0:
		return []string{NoTools}, issues
	}
	return kept, issues
}

// firstToolList takes the first layer whose list of tool names is
// non-empty and filters it to the allowlist in configured order, with one
// warning naming the unknown names it dropped (NoTools is dropped
// silently); found is false when no layer had a list. With dedup, a name
// is kept (and warned about) once. The names also accepts are kept like
// allowlist members (a policy list's host tools).
func firstToolList(cs []candidate, dedup bool, also func(string) bool) (kept []string, found bool, issues []issue) {
	for _, c := range cs {
		names, ok := toolNames(c.value)
		if !ok {
			issues = append(issues, issue{c, "is not a list of tool names"})
			continue
		}
		if len(names) == 0 {
			continue
		}
		kept = []string{}
		var unknown []string
		for _, n := range names {
			switch {
			case dedup && slices.Contains(kept, n):
			case slices.Contains(tools.Allowlist, n), also(n):
				kept = append(kept, n)
			case n != NoTools && !(dedup && slices.Contains(unknown, n)):
				unknown = append(unknown, n)
			}
		}
		if len(unknown) > 0 {
			issues = append(issues, issue{c, "names tools outside the allowlist (" +
				strings.Join(tools.Allowlist, ", ") + "), dropped: " + capRunes(strings.Join(unknown, ","), maxShown)})
		}
		return kept, true, issues
	}
	return nil, false, issues
}

// resolvePath: the first non-blank value that names a usable path wins,
// made absolute by abs.
func resolvePath(cs []candidate, abs func(string) (string, error)) (string, []issue) {
	var issues []issue
	for _, c := range cs {
		s, isStr := c.value.(string)
		t := strings.TrimSpace(s)
		switch {
		case !isStr:
			issues = append(issues, issue{c, "is not a string"})
			continue
		case t == "":
			if s != "" {
				issues = append(issues, issue{c, "is blank"})
			}
			continue
		case strings.ContainsRune(t, 0) || !utf8.ValidString(t):
			issues = append(issues, issue{c, "is not a usable path (NUL byte or invalid UTF-8)"})
			continue
		}
		p, err := abs(t)
		if err != nil {
			issues = append(issues, issue{c, "cannot be resolved: " + err.Error()})
			continue
		}
		return p, issues
	}
	return "", issues
}

func showInt(n int64) string { return strconv.FormatInt(n, 10) }

func showList(names []string) string {
	return fmt.Sprintf("[%s]", strings.Join(names, ", "))
}

func showTools(names []string) string {
	if len(names) == 0 {
		return "no helpers"
	}
	return fmt.Sprintf("[%s]", strings.Join(names, ", "))
}
