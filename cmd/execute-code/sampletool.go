package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/executecode/executecode"
	"github.com/executecode/executecode/tools"
)

// sampleSpec is the host tool --sample-host-tool registers: it shows a
// host tool under a name of its own, called from a script, answering
// JSON, without reaching anything outside the call's arguments.
var sampleSpec = tools.Spec{
	Name:        "wordcount",
	Description: "Count the lines, words and characters of a text; returns a dict.",
	Parameters: json.RawMessage(`{"type":"object","required":["text"],"properties":{` +
		`"text":{"type":"string","description":"The text to count."}}}`),
}

type wordCount struct{}

func (wordCount) Name() string { return sampleSpec.Name }

func (wordCount) Execute(_ context.Context, params map[string]any) (tools.Result, error) {
	s, ok := params["text"].(string)
	if !ok {
		return tools.Result{}, fmt.Errorf("%w: text must be a string", tools.ErrBadParam)
	}
	return tools.JSONResult(map[string]int{
		"lines": strings.Count(s, "\n"), "words": len(strings.Fields(s)), "chars": utf8.RuneCountInString(s),
	})
}

// sampleHostTool is the option --sample-host-tool adds.
func sampleHostTool() executecode.Option { return executecode.WithHostTool(sampleSpec, wordCount{}) }
