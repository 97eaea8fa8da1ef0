package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	executecode "github.com/executecode/executecode"
)

// conformanceFiles are the files the corpus's helper calls read.
var conformanceFiles = map[string]string{"data.txt": "the file's text\n"}

// A corpus of short cells with known outputs, in the shape of the public
// notebook test suites (testdata/conformance, one script per file; each
// "# known: …" line is text its result must hold), run per call and as
// session cells: the two modes must say the same thing. Per call is the
// reference; a session result differs only in its session-only details
// (persistent, kernel_reused, state_retained, duration_ms, reason and the
// spill's own path), in the script's name in tracebacks and warnings,
// and in where an uncaught exception's ending stands.
func TestSessionCellsSayWhatPerCallRunsSay(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.py"))
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	perCall := newEnv(t, conformanceFiles)
	session := sessionEnv(t, conformanceFiles)
	for _, path := range scripts {
		body, err := os.ReadFile(path)
		require.NoError(t, err)
		script := string(body)
		t.Run(strings.TrimSuffix(filepath.Base(path), ".py"), func(t *testing.T) {
			want := perCall.run(script)
			// A fresh session for every script, as a notebook's first cell.
			o := session.attach(filepath.Base(path))
			got := session.cell(o, script)
			for _, known := range knownLines(script) {
				assert.Contains(t, want.Text(), known, "per call")
			}
			assert.Equal(t, comparable(want), comparable(got))
		})
	}
}

// knownLines are the script's "# known: " lines.
func knownLines(script string) []string {
	var known []string
	for _, line := range strings.Split(script, "\n") {
		if k, ok := strings.CutPrefix(line, "# known: "); ok {
			known = append(known, k)
		}
	}
	return known
}

// conformed is what both modes must agree on.
type conformed struct {
	Text                           string
	Blocks                         []string
	ExitCode                       *int
	Truncated                      bool
	Spilled                        bool
	KilledBy                       string
	RPCCalls, RPCDenied, RPCErrors int
	RPCBytes                       int64
	RPCTools                       []string
}

// scriptName is how a per-call run's tracebacks and warnings name the
// script; a session cell's is "<cell>", the one documented difference in
// the text.
var scriptName = strings.NewReplacer(`File "<workspace>/script.py"`, `File "<cell>"`, "<workspace>/script.py:", "<cell>:")

// raisedHeadline is a session cell's headline for an uncaught exception.
var raisedHeadline = regexp.MustCompile(`^Script raised [^\n]* \(exit code 1\)\n\n`)

// exceptionEnding puts an exception's ending where a per-call run has it:
// a session cell headlines it (Script raised <Name>: <message>, the
// design's choice for sessions), a per-call run ends with its exit code.
func exceptionEnding(r executecode.Result, text string) string {
	if r.Details.Reason != executecode.ReasonException || !raisedHeadline.MatchString(text) {
		return text
	}
	return raisedHeadline.ReplaceAllString(text, "") + "\n\nScript exited with code 1"
}

func comparable(r executecode.Result) conformed {
	d := r.Details
	text := exceptionEnding(r, scriptName.Replace(r.Text()))
	if d.FullOutputPath != "" {
		text = strings.ReplaceAll(text, "<spill>/"+filepath.Base(d.FullOutputPath), "<spill>")
	}
	return conformed{
		Text: text, Blocks: r.Blocks, ExitCode: d.ExitCode, Truncated: d.Truncated, Spilled: d.FullOutputPath != "",
		KilledBy: string(d.KilledBy), RPCCalls: d.RPCCalls, RPCDenied: d.RPCDenied, RPCErrors: d.RPCErrors, RPCBytes: d.RPCBytes,
		RPCTools: d.RPCTools,
	}
}
