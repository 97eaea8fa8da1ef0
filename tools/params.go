package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// args reads one tool's decoded parameters strictly: a script can send any
// JSON, so every value is type-checked and every unknown key is refused
// instead of silently ignored.
type args struct {
	tool string
	m    map[string]any
}

// newArgs refuses keys outside known. Unknown keys are listed in sorted
// order so the message is stable.
func newArgs(tool string, m map[string]any, known ...string) (args, error) {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, k := range unknown {
			quoted[i] = fmt.Sprintf("%q", k)
			if alt := camelHint(k, known); alt != "" {
				quoted[i] += fmt.Sprintf(" (did you mean %q?)", alt)
			}
		}
		noun := "parameter"
		if len(unknown) > 1 {
			noun = "parameters"
		}
		return args{}, badParam("unknown %s %s for %s (accepted: %s)",
			noun, strings.Join(quoted, ", "), tool, strings.Join(known, ", "))
	}
	return args{tool: tool, m: m}, nil
}

// camelHint maps a snake_case key to the camelCase key the tool accepts:
// webfetch takes extractMode/maxChars while its python signature spells
// them extract_mode/max_chars, and batch() passes raw dicts.
func camelHint(key string, known []string) string {
	parts := strings.Split(key, "_")
	if len(parts) < 2 {
		return ""
	}
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	camel := strings.Join(parts, "")
	if slices.Contains(known, camel) {
		return camel
	}
	return ""
}

// value returns the parameter, or ok=false when it is absent or null
// (python's None): both mean "use the default".
func (a args) value(name string) (any, bool) {
	v, ok := a.m[name]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

func (a args) wrongType(name, want string, v any) error {
	return badParam("parameter %q of %s must be %s, got %s", name, a.tool, want, describeValue(v))
}

func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case float64, float32, json.Number:
		return fmt.Sprintf("number %v", x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("integer %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func (a args) str(name string) (string, bool, error) {
	v, ok := a.value(name)
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, a.wrongType(name, "a string", v)
	}
	return s, true, nil
}

// requiredStr is str for a parameter without a default; an empty string
// counts as missing because no tool can do anything useful with it.
func (a args) requiredStr(name string) (string, error) {
	s, ok, err := a.str(name)
	if err != nil {
		return "", err
	}
	if !ok || s == "" {
		return "", badParam("parameter %q of %s is required", name, a.tool)
	}
	return s, nil
}

func (a args) boolean(name string, def bool) (bool, error) {
	v, ok := a.value(name)
	if !ok {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, a.wrongType(name, "a boolean", v)
	}
	return b, nil
}

// integer accepts JSON numbers that are whole (5 and 5.0, not 5.5) plus Go
// integer types for embedders calling tools directly, and enforces min.
func (a args) integer(name string, def, minimum int) (int, error) {
	v, ok := a.value(name)
	if !ok {
		return def, nil
	}
	n, isInt := toInt(v)
	if !isInt {
		return 0, a.wrongType(name, "an integer", v)
	}
	if n < minimum {
		return 0, badParam("parameter %q of %s must be at least %d, got %d", name, a.tool, minimum, n)
	}
	return n, nil
}

// maxExactFloat is the largest float64 range in which every integer is
// exact; anything beyond it cannot have been meant as a count.
const maxExactFloat = 1 << 53

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		if math.Trunc(x) != x || math.Abs(x) > maxExactFloat {
			return 0, false
		}
		return int(x), true
	case float32:
		return toInt(float64(x))
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			f, ferr := x.Float64()
			if ferr != nil {
				return 0, false
			}
			return toInt(f)
		}
		return clampInt64(n), true
	case int:
		return x, true
	case int8:
		return int(x), true
	case int16:
		return int(x), true
	case int32:
		return int(x), true
	case int64:
		return clampInt64(x), true
	case uint:
		return clampUint64(uint64(x)), true
	case uint8:
		return int(x), true
	case uint16:
		return int(x), true
	case uint32:
		return clampUint64(uint64(x)), true
	case uint64:
		return clampUint64(x), true
	}
	return 0, false
}

func clampInt64(n int64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	if n < math.MinInt {
		return math.MinInt
	}
	return int(n)
}

func clampUint64(n uint64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}
