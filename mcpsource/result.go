package mcpsource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/executecode/executecode/tools"
)

// maxErrorBytes bounds the message of a tool error a server words: the
// result-byte budget charges results, not errors, so a server's error
// must not carry a result's worth of text past it.
const maxErrorBytes = 4096

// resultOf is a call's answer as a helper returns it: the structured
// content as JSON when the server gave some (the script gets python
// values), else the content blocks as text, one per block; a result the
// server marked as an error is the call's error, in the server's words.
// Untrusted marks both, so that whatever the script was given counts.
func resultOf(helper string, res *mcp.CallToolResult, untrusted bool) (tools.Result, error) {
	if res.IsError {
		msg := strings.TrimSpace(contentText(res.Content))
		if msg == "" {
			msg = "the tool reported an error"
		}
		return tools.Result{}, serverError(helper, msg, untrusted)
	}
	if res.StructuredContent != nil {
		out, err := tools.JSONResult(res.StructuredContent)
		if err != nil {
			return tools.Result{}, fmt.Errorf("%s: structured content: %w", helper, err)
		}
		out.Untrusted = untrusted
		return out, nil
	}
	out := tools.Result{Untrusted: untrusted, Content: make([]tools.Content, 0, len(res.Content))}
	for _, c := range res.Content {
		out.Content = append(out.Content, tools.Content{Type: "text", Text: blockText(c)})
	}
	if len(out.Content) == 0 {
		out.Content = append(out.Content, tools.Content{Type: "text", Text: ""})
	}
	return out, nil
}

// serverError is an error whose message the server wrote: cut to
// maxErrorBytes, and marked untrusted unless the server is trusted.
func serverError(helper, msg string, untrusted bool) error {
	if len(msg) > maxErrorBytes {
		msg = strings.ToValidUTF8(msg[:maxErrorBytes], "") + "…"
	}
	err := fmt.Errorf("%s: %s", helper, msg)
	if untrusted {
		return &tools.UntrustedError{Err: err}
	}
	return err
}

func contentText(cs []mcp.Content) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = blockText(c)
	}
	return strings.Join(parts, "\n")
}

// blockText is one content block as text: text as it is, an embedded text
// resource's text, and for anything a script cannot use as a string (an
// image, audio, a binary resource) a line saying what was left out, with
// a resource's URI, which another tool may be able to read.
func blockText(c mcp.Content) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return fmt.Sprintf("[image omitted: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.AudioContent:
		return fmt.Sprintf("[audio omitted: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data))
	case *mcp.ResourceLink:
		return fmt.Sprintf("[resource link: %s]", c.URI)
	case *mcp.EmbeddedResource:
		if c.Resource == nil {
			return "[empty resource omitted]"
		}
		if c.Resource.Text != "" || len(c.Resource.Blob) == 0 {
			return c.Resource.Text
		}
		return fmt.Sprintf("[resource omitted: %s, %s, %d bytes]", c.Resource.URI, orUnknown(c.Resource.MIMEType), len(c.Resource.Blob))
	}
	return "[non-text content omitted]"
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

// Errors of a call that never got the server's answer; the message names
// the helper and the server, never the server's stderr (logged instead).
var (
	// ErrServerGone is a server whose connection ended: its process
	// exited, or its transport closed.
	ErrServerGone = errors.New("the MCP server is gone")
	// ErrNoAnswer is a call whose deadline came before the answer.
	ErrNoAnswer = errors.New("the MCP server did not answer in time")
	// ErrClosed is a call after Close.
	ErrClosed = errors.New("the MCP servers are closed")
)
