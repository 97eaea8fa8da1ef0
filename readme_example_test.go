package executecode_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeExampleMarker precedes, in README.md, the Go block that quotes
// Example's body.
const readmeExampleMarker = "<!-- the body of Example in example_test.go; TestREADMEQuotesTheExample keeps them equal -->"

// The README's embedding snippet is Example's body, so it compiles and
// runs with every test run and cannot drift from the API again.
func TestREADMEQuotesTheExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	s := string(src)
	start := strings.Index(s, "\nfunc Example() {\n")
	require.GreaterOrEqual(t, start, 0, "example_test.go has func Example")
	body := s[start+len("\nfunc Example() {\n"):]
	end := strings.Index(body, "\t// Output:")
	require.GreaterOrEqual(t, end, 0, "Example has an Output comment")
	var want []string
	for _, line := range strings.Split(strings.TrimRight(body[:end], "\n"), "\n") {
		want = append(want, strings.TrimPrefix(line, "\t"))
	}

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	r := string(readme)
	at := strings.Index(r, readmeExampleMarker)
	require.GreaterOrEqual(t, at, 0, "README.md has the example marker")
	block := strings.TrimPrefix(r[at+len(readmeExampleMarker):], "\n")
	require.True(t, strings.HasPrefix(block, "```go\n"), "a Go block follows the marker")
	block = block[len("```go\n"):]
	close := strings.Index(block, "```")
	require.GreaterOrEqual(t, close, 0)
	assert.Equal(t, strings.Join(want, "\n"), strings.TrimRight(block[:close], "\n"))
}
