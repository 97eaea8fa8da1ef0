package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseBool accepts true|"true"|"1"|1 and false|"false"|"0"|0.
func parseBool(v any) (b, ok bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		switch strings.TrimSpace(x) {
		case "true", "1":
			return true, true
		case "false", "0":
			return false, true
		}
		return false, false
	}
	if n, isInt := intValue(v); isInt {
		switch n {
		case 1:
			return true, true
		case 0:
			return false, true
		}
	}
	return false, false
}

// parseInt accepts a Go integer or a string that, trimmed, is entirely a
// base-10 integer with an optional sign. A string beyond int64 still is an
// integer: it saturates, and saturated says so.
func parseInt(v any) (n int64, ok, saturated bool) {
	if s, isStr := v.(string); isStr {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err == nil {
			return n, true, false
		}
		if errors.Is(err, strconv.ErrRange) {
			return n, true, true
		}
		return 0, false, false
	}
	n, ok = intValue(v)
	return n, ok, false
}

// intValue converts any Go integer type; unsigned values beyond int64
// saturate.
func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return satUint(uint64(x)), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return satUint(x), true
	}
	return 0, false
}

func satUint(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

// toInt narrows to int, saturating on platforms where int is 32 bits.
func toInt(n int64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	if n < math.MinInt {
		return math.MinInt
	}
	return int(n)
}

// splitToolList splits a tools string on ',' or ':'.
func splitToolList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ':' })
}

// toolNames turns a tools value into trimmed, non-empty names. ok is false
// for a value that is neither a string nor a list of strings.
func toolNames(v any) (names []string, ok bool) {
	var parts []string
	switch x := v.(type) {
	case string:
		parts = splitToolList(x)
	case []string:
		parts = x
	case []any:
		for _, e := range x {
			s, isStr := e.(string)
			if !isStr {
				return nil, false
			}
			parts = append(parts, s)
		}
	default:
		return nil, false
	}
	for _, p := range parts {
		if t := strings.TrimSpace(p); t != "" {
			names = append(names, t)
		}
	}
	return names, true
}

// maxShown caps how much of a raw value a warning repeats, so a huge value
// cannot flood the log.
const maxShown = 80

// shown renders a raw value for a warning: valid UTF-8, at most maxShown
// characters, strings quoted.
func shown(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = strconv.Quote(capRunes(strings.ToValidUTF8(x, "\uFFFD"), maxShown))
	default:
		s = fmt.Sprintf("%v", v)
	}
	return capRunes(strings.ToValidUTF8(s, "\uFFFD"), maxShown)
}

func capRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// typeName names a decoded TOML value's type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float32, float64:
		return "float"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	case []map[string]any:
		return "array of tables"
	}
	if _, ok := intValue(v); ok {
		return "integer"
	}
	return "date/time"
}
