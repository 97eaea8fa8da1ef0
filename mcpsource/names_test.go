package mcpsource

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/executecode/executecode/tools"
)

func TestParamNamesBecomeUsableKeywordArguments(t *testing.T) {
	for in, want := range map[string]string{
		"path":        "path",
		"sortBy":      "sortBy",
		"max-results": "max_results",
		"from":        "from_",
		"class":       "class_",
		"None":        "None_",
		"TypeError":   "TypeError_",
		"_private":    "private",
		"__":          "arg",
		"":            "arg",
		"1st":         "arg_1st",
		"a.b/c":       "a_b_c",
		"día":         "d_a",
		"if-":         "if_",
		"type":        "type",
	} {
		got := paramName(in)
		assert.Equal(t, want, got, "%q", in)
		assert.True(t, tools.UsableParam(got), "%q -> %q", in, got)
	}
}

func TestNamesThatCollideAfterSanitisingGetNumberedInOrder(t *testing.T) {
	got := assign([]string{"a_b", "a-b", "a.b", "c"}, identifierPart, nil)
	assert.Equal(t, map[string]string{"a_b": "a_b", "a-b": "a_b_2", "a.b": "a_b_3", "c": "c"}, got,
		"the name that needed no change keeps it; the others follow in order of their original")
	got = assign([]string{"x-y", "x_y_2"}, identifierPart, []string{"x_y"})
	assert.Equal(t, map[string]string{"x-y": "x_y_3", "x_y_2": "x_y_2"}, got, "taken names and numbered ones are skipped")
}

func TestDescriptionsBecomeOneBoundedLine(t *testing.T) {
	assert.Equal(t, "Read a file. Then more.", oneLine("  Read a file.\n\n\tThen\u2028more.\x00\u200b ", "x"))
	assert.Equal(t, "fallback", oneLine(" \n\x01 ", "fallback"))
	long := oneLine(strings.Repeat("word ", 200), "x")
	assert.LessOrEqual(t, len([]rune(long)), maxDescription+1)
	assert.True(t, strings.HasSuffix(long, "word…"), long)
}
