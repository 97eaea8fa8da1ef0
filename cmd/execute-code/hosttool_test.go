package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const wordcountScript = `c = wordcount("one two\nthree\n")
text(type(c).__name__ + " " + str(sorted(c.items())))
try:
    wordcount()
except TypeError as e:
    text(str(e))`

var wordcountBlocks = []string{
	"dict [('chars', 14), ('lines', 2), ('words', 3)]",
	"wordcount() missing 1 required positional argument: 'text'",
}

func TestRunCallsTheSampleHostToolInBothModes(t *testing.T) {
	for _, mode := range []string{"per_call", "session"} {
		t.Run(mode, func(t *testing.T) {
			r := cli(t, wordcountScript, nil, "run", "--mode", mode, "--sample-host-tool", "-")
			require.Equal(t, 0, r.code, r.stdout+r.stderr)
			for _, b := range wordcountBlocks {
				assert.Contains(t, r.stdout, b)
			}
		})
	}
	// --tools may name the sample tool once it is registered, and keeps it
	// reachable beside the built-ins it narrows to.
	r := cli(t, "text(str(wordcount('a b')['words']))\ntext(str('grep' in dir()))", nil, "run", "--sample-host-tool", "--tools", "read,wordcount", "-")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "Script result (text()):\n2\nFalse\n")
	r = cli(t, "text('x')", nil, "run", "--tools", "read,wordcount", "-")
	assert.Equal(t, 2, r.code, "without the tool registered, its name is a usage error")
	assert.Contains(t, r.stderr, `"wordcount"`)

	r = cli(t, "wordcount('x')", nil, "run", "-")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "NameError: name 'wordcount' is not defined", "the tool exists only when the host registers it")
}

func TestServeCallsTheSampleHostTool(t *testing.T) {
	p := startServe(t, "--sample-host-tool")
	p.send(`{"id":1,"op":"attach","session":"s1","agent":"main"}`)
	assert.Equal(t, map[string]any{"id": 1.0, "ok": true}, p.answer())
	p.send(`{"id":2,"op":"execute","session":"s1","script":` + mustJSON(t, wordcountScript) + `}`)
	got := blocks(t, p.answer())
	require.Len(t, got, 2)
	assert.Equal(t, wordcountBlocks[0], got[0])
	assert.Equal(t, wordcountBlocks[1], got[1])
	p.send(`{"id":3,"op":"detach","session":"s1"}`)
	assert.Equal(t, map[string]any{"id": 3.0, "ok": true}, p.answer())
}
