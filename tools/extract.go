package tools

import (
	"bytes"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

type contentKind int

const (
	contentBinary contentKind = iota
	contentText
	contentHTML
)

// textApplicationTypes are application/* types whose bodies are text.
var textApplicationTypes = map[string]bool{
	"application/json":                  true,
	"application/xml":                   true,
	"application/javascript":            true,
	"application/ecmascript":            true,
	"application/x-javascript":          true,
	"application/yaml":                  true,
	"application/x-yaml":                true,
	"application/toml":                  true,
	"application/x-sh":                  true,
	"application/sql":                   true,
	"application/graphql":               true,
	"application/x-ndjson":              true,
	"application/x-www-form-urlencoded": true,
}

// classify decides how a body is shown from its media type. A missing or
// unparsable type is sniffed; application/octet-stream whose bytes look
// like text is treated as text, since servers label unknown files (raw
// .md, .go, logs) that way.
func classify(header string, body []byte) (mediaType, charset string, kind contentKind) {
	mediaType, params, err := mime.ParseMediaType(header)
	if header == "" || err != nil {
		mediaType, params, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	mediaType = strings.ToLower(mediaType)
	charset = strings.ToLower(params["charset"])
	switch {
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		return mediaType, charset, contentHTML
	case strings.HasPrefix(mediaType, "text/"),
		textApplicationTypes[mediaType],
		strings.HasSuffix(mediaType, "+json"),
		strings.HasSuffix(mediaType, "+xml"),
		strings.HasSuffix(mediaType, "+yaml"):
		return mediaType, charset, contentText
	case mediaType == "application/octet-stream" && !looksBinary(body[:min(len(body), sniffBytes)]):
		return mediaType, charset, contentText
	}
	return mediaType, charset, contentBinary
}

// decodeText turns a body into UTF-8. Latin-1 and its Windows superset are
// decoded byte by byte (the 0x80-0x9F range of windows-1252 is rare in
// pages); anything else is taken as UTF-8 with invalid bytes replaced.
func decodeText(body []byte, charset string) string {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	switch charset {
	case "iso-8859-1", "latin1", "latin-1", "iso8859-1", "windows-1252", "cp1252", "us-ascii":
		if utf8.Valid(body) {
			return string(body)
		}
		var b strings.Builder
		b.Grow(len(body) * 2)
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		return b.String()
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// pageTitle is the text of the document's first <title>.
func pageTitle(doc *html.Node) string {
	var find func(*html.Node) string
	find = func(n *html.Node) string {
		if n.Type == html.ElementNode && n.DataAtom == atom.Title {
			var b strings.Builder
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.TextNode {
					b.WriteString(c.Data)
				}
			}
			return strings.Join(strings.Fields(b.String()), " ")
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Body {
			return ""
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if t := find(c); t != "" {
				return t
			}
		}
		return ""
	}
	return find(doc)
}

// skippedElements carry no readable text.
var skippedElements = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true, atom.Button: true, atom.Select: true, atom.Textarea: true,
	atom.Input: true,
}

// blockElements start and end on their own line in text mode.
var blockElements = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Dd: true, atom.Details: true, atom.Div: true, atom.Dl: true, atom.Dt: true,
	atom.Fieldset: true, atom.Figcaption: true, atom.Figure: true, atom.Footer: true,
	atom.Form: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true,
	atom.H5: true, atom.H6: true, atom.Header: true, atom.Hr: true, atom.Li: true,
	atom.Main: true, atom.Nav: true, atom.Ol: true, atom.P: true, atom.Pre: true,
	atom.Section: true, atom.Summary: true, atom.Table: true, atom.Tr: true,
	atom.Ul: true, atom.Caption: true, atom.Tbody: true, atom.Thead: true,
	atom.Tfoot: true,
}

// tightElements end a line but not a paragraph.
var tightElements = map[atom.Atom]bool{
	atom.Li: true, atom.Tr: true, atom.Dt: true, atom.Dd: true,
}

var (
	manyBlankLines = regexp.MustCompile(`\n{3,}`)
	spaceRun       = regexp.MustCompile(`[ \t\n\r\f]+`)
)

// htmlText extracts the readable text of a document: no markup, blank
// lines between block elements, list items on their own line prefixed
// "- ", table cells separated by tabs, whitespace collapsed except inside
// <pre>.
func htmlText(doc *html.Node) string {
	var b strings.Builder
	last := func() byte {
		s := b.String()
		if s == "" {
			return '\n'
		}
		return s[len(s)-1]
	}
	var walk func(n *html.Node, pre bool)
	walk = func(n *html.Node, pre bool) {
		switch n.Type {
		case html.TextNode:
			if pre {
				b.WriteString(n.Data)
				return
			}
			text := spaceRun.ReplaceAllString(n.Data, " ")
			if strings.HasPrefix(text, " ") && strings.IndexByte(" \n\t", last()) >= 0 {
				text = text[1:]
			}
			b.WriteString(text)
			return
		case html.ElementNode:
			if skippedElements[n.DataAtom] {
				return
			}
			switch n.DataAtom {
			case atom.Br:
				b.WriteByte('\n')
				return
			case atom.Td, atom.Th:
				if last() != '\n' {
					b.WriteByte('\t')
				}
			}
			block := blockElements[n.DataAtom]
			if block {
				if last() != '\n' {
					b.WriteByte('\n')
				}
				if !tightElements[n.DataAtom] {
					b.WriteByte('\n')
				}
			}
			if n.DataAtom == atom.Li {
				b.WriteString("- ")
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c, pre || n.DataAtom == atom.Pre)
			}
			if block && last() != '\n' {
				b.WriteByte('\n')
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, pre)
		}
	}
	walk(doc, false)
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	out := manyBlankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n")
	return strings.TrimSpace(out)
}
