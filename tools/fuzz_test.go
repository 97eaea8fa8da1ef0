package tools

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"
)

var readRow = regexp.MustCompile(`^ *\d+\t`)

// FuzzReadLines feeds arbitrary file bytes to read's renderer: it must not
// panic, must produce valid UTF-8, and every row it shows must carry a line
// number, whatever the bytes.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte("a\nb\n"), 1, 10)
	f.Add([]byte("a\r\nb"), 2, 1)
	f.Add([]byte(""), 1, 1)
	f.Add([]byte("\xff\xfe\n\x00"), 1, 5)
	f.Add([]byte(strings.Repeat("é", 3000)+"\n"), 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, offset, limit int) {
		if offset < 1 || limit < 1 || offset > 1<<20 || limit > 1<<20 {
			t.Skip()
		}
		got, err := readLines(context.Background(), bytes.NewReader(data), "f", offset, limit, len(data))
		if err != nil {
			return
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 output %q", got)
		}
		if got == "(empty file)" {
			return
		}
		for _, row := range strings.Split(got, "\n") {
			if strings.HasPrefix(row, "[") {
				break // the notes come last
			}
			if !readRow.MatchString(row) {
				t.Fatalf("row without a line number: %q in %q", row, got)
			}
		}
	})
}

// FuzzExtractHTML feeds arbitrary pages to both webfetch extractions: they
// must not panic or fail, and text mode must yield valid UTF-8.
func FuzzExtractHTML(f *testing.F) {
	f.Add(testPage)
	f.Add("<p>a<br>b</p><script>x</script>")
	f.Add("<table><td>1<td>2</table><pre>  x\n y</pre>")
	f.Add("<ul><li><ul><li>nested")
	f.Add("\xff<title>\x00</title>")
	tool, err := NewWebfetch(Options{})
	if err != nil {
		f.Fatal(err)
	}
	conv := tool.(*webfetchTool).conv
	f.Fuzz(func(t *testing.T, page string) {
		doc, err := html.Parse(strings.NewReader(strings.ToValidUTF8(page, "\uFFFD")))
		if err != nil {
			return
		}
		_ = pageTitle(doc)
		text := htmlText(doc)
		if !utf8.ValidString(text) {
			t.Fatalf("invalid UTF-8 text %q", text)
		}
		if _, err := conv.ConvertNode(doc); err != nil {
			t.Fatalf("markdown conversion failed: %v", err)
		}
	})
}

// FuzzIgnoreFile feeds arbitrary ignore-file text and paths to the parser
// and the matcher (a script writes both): they must not panic, the cost
// charged to a walk's budget must count the text and every pattern, and
// any path gets an answer.
func FuzzIgnoreFile(f *testing.F) {
	f.Add("*.log\n!keep.log\nbuild/\n", "a/keep.log", false)
	f.Add("/top\r\n# comment\n\n   \n\\#x\n\\!y\n", "top", true)
	f.Add("**/gen/**\na/**/b\n**\n***\n", "p/gen/q", false)
	f.Add("[\n[]\n[!a-\\\n\\", "[", false)
	f.Add("/\n//\n!/\n!\n", "a//b", true)
	f.Fuzz(func(t *testing.T, text, path string, isDir bool) {
		if len(text) > maxIgnoreFileBytes {
			t.Skip()
		}
		cost, n := ignoreCost(text)
		if cost < len(text)+n*patternCost {
			t.Fatalf("cost %d does not count the text and %d patterns", cost, n)
		}
		f, err := parseIgnore(context.Background(), text, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.patterns) != n || len(f.basename) != n {
			t.Fatalf("parsed %d patterns, counted %d", len(f.patterns), n)
		}
		var parts []string
		for _, p := range strings.Split(path, "/") {
			if p != "" {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			return
		}
		deeper := *f
		deeper.depth = 1
		stack := ignoreStack{f, &deeper}
		if _, err := stack.ignored(context.Background(), parts, isDir); err != nil {
			t.Fatal(err)
		}
	})
}
