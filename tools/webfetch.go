package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
)

const (
	defaultMaxChars = 50_000
	maxRedirects    = 5
	// dialTimeout bounds connection setup within the overall fetch timeout.
	dialTimeout = 10 * time.Second
)

type webfetchTool struct {
	client       *http.Client
	timeout      time.Duration
	maxBytes     int64
	allowPrivate bool
	conv         *converter.Converter
}

// NewWebfetch returns the webfetch tool: webfetch(url, extractMode=None,
// maxChars=None) (the python stub's extract_mode/max_chars are sent
// camelCase).
//
// Only http and https URLs are fetched, also across redirects (at most 5);
// anything else is refused with ErrNotAllowed. Unless
// Options.AllowPrivateNetworks, non-public addresses are refused too (see
// Options). The output starts with "URL: <final url>" and
// "Content-Type: <media type>" lines (plus "Title: ..." for HTML pages), a
// blank line, then the content: HTML as markdown (extractMode "markdown",
// the default) or as plain text (extractMode "text": the page's readable
// text without markup, extracted from the DOM rather than from the
// markdown); other text types as they are; binary types are refused with
// ErrBinary. The content is cut at maxChars characters (default 50,000),
// the body at Options.FetchMaxBytes, each with a note. No response header
// or cookie is ever shown. Results are always marked Untrusted.
func NewWebfetch(opts Options) (Tool, error) {
	t := &webfetchTool{
		timeout:      opts.FetchTimeout,
		maxBytes:     opts.FetchMaxBytes,
		allowPrivate: opts.AllowPrivateNetworks,
		conv: converter.NewConverter(converter.WithPlugins(
			base.NewBasePlugin(),
			commonmark.NewCommonmarkPlugin(),
			table.NewTablePlugin(),
			strikethrough.NewStrikethroughPlugin(),
		)),
	}
	if t.timeout <= 0 {
		t.timeout = DefaultFetchTimeout
	}
	if t.maxBytes <= 0 {
		t.maxBytes = DefaultFetchMaxBytes
	}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		c.CheckRedirect = t.redirectPolicy(opts.HTTPClient.CheckRedirect)
		t.client = &c
	} else {
		t.client = t.defaultClient()
	}
	return t, nil
}

// defaultClient opens a fresh connection per fetch (no keep-alive): fetches
// go to many hosts, and idle connections would outlive the call. When
// private networks are refused, the dialer checks every address it
// connects to, and proxies from the environment are not used, because the
// check must see the real destination rather than the proxy.
func (t *webfetchTool) defaultClient() *http.Client {
	dialer := &net.Dialer{Timeout: dialTimeout}
	tr := &http.Transport{
		DialContext:            dialer.DialContext,
		DisableKeepAlives:      true,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    dialTimeout,
		MaxResponseHeaderBytes: 1 << 20,
	}
	if t.allowPrivate {
		tr.Proxy = http.ProxyFromEnvironment
	} else {
		dialer.ControlContext = guardDial
	}
	return &http.Client{Transport: tr, Timeout: t.timeout, CheckRedirect: t.redirectPolicy(nil)}
}

func (t *webfetchTool) redirectPolicy(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if err := t.checkURL(req.URL); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

// checkURL enforces the scheme and, when private networks are refused,
// the literal host; it runs on the first URL and on every redirect.
func (t *webfetchTool) checkURL(u *url.URL) error {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if scheme == "" {
			return newError(ErrNotAllowed, "webfetch only fetches http and https URLs; %q has no scheme", u.Redacted())
		}
		return newError(ErrNotAllowed, "webfetch only fetches http and https URLs, not %q", scheme)
	}
	if u.Host == "" {
		return badParam("url %q has no host", u.Redacted())
	}
	if !t.allowPrivate {
		return checkLiteralHost(u.Hostname())
	}
	return nil
}

func (*webfetchTool) Name() string { return Webfetch }

func (t *webfetchTool) Execute(ctx context.Context, params map[string]any) (Result, error) {
	res, err := t.fetch(ctx, params)
	// Whatever came back (even an error text) came from outside the host.
	res.Untrusted = true
	return res, err
}

func (t *webfetchTool) fetch(ctx context.Context, params map[string]any) (Result, error) {
	a, err := newArgs(Webfetch, params, "url", "extractMode", "maxChars")
	if err != nil {
		return Result{}, err
	}
	raw, err := a.requiredStr("url")
	if err != nil {
		return Result{}, err
	}
	mode, hasMode, err := a.str("extractMode")
	if err != nil {
		return Result{}, err
	}
	if !hasMode || mode == "" {
		mode = "markdown"
	}
	if mode != "markdown" && mode != "text" {
		return Result{}, badParam(`parameter "extractMode" of webfetch must be "markdown" or "text", got %q`, mode)
	}
	maxChars, err := a.integer("maxChars", defaultMaxChars, 1)
	if err != nil {
		return Result{}, err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return Result{}, badParam("invalid url %q: %s", raw, urlReason(err))
	}
	if err := t.checkURL(u); err != nil {
		return Result{}, err
	}

	fctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{}, badParam("invalid url %q: %s", raw, urlReason(err))
	}
	req.Header.Set("User-Agent", "execute-code-webfetch/1")
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5")
	resp, err := t.client.Do(req)
	if err != nil {
		return Result{}, t.fetchError(ctx, u, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{}, fmt.Errorf("webfetch %s: HTTP %s", final.Redacted(), resp.Status)
	}
	if header := resp.Header.Get("Content-Type"); header != "" {
		// Refuse a declared binary type before downloading it.
		if mt, _, kind := classify(header, nil); kind == contentBinary && mt != "application/octet-stream" {
			return Result{}, binaryRefused(final, mt)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.maxBytes+1))
	if err != nil {
		return Result{}, t.fetchError(ctx, final, err)
	}
	cut := int64(len(body)) > t.maxBytes
	if cut {
		body = body[:t.maxBytes]
	}

	mediaType, charset, kind := classify(resp.Header.Get("Content-Type"), body)
	if kind == contentBinary {
		return Result{}, binaryRefused(final, mediaType)
	}
	text := decodeText(body, charset)
	var head strings.Builder
	fmt.Fprintf(&head, "URL: %s\nContent-Type: %s\n", final.Redacted(), mediaType)
	elementsCut := false
	if kind == contentHTML {
		text, elementsCut = limitElements(text, maxHTMLElements)
		doc, err := html.Parse(strings.NewReader(text))
		if err != nil {
			return Result{}, fmt.Errorf("webfetch %s: parse HTML: %w", final.Redacted(), err)
		}
		if title := pageTitle(doc); title != "" {
			fmt.Fprintf(&head, "Title: %s\n", title)
		}
		if mode == "text" {
			text = htmlText(doc)
		} else {
			md, err := t.conv.ConvertNode(doc, converter.WithDomain(final.String()), converter.WithContext(fctx))
			if err != nil {
				if ctxErr := ctx.Err(); ctxErr != nil {
					return Result{}, ctxErr
				}
				return Result{}, fmt.Errorf("webfetch %s: convert HTML to markdown: %w", final.Redacted(), err)
			}
			text = strings.TrimSpace(string(md))
		}
	}

	var notes []string
	if cut {
		notes = append(notes, fmt.Sprintf("[response body cut at %d bytes]", t.maxBytes))
	}
	if elementsCut {
		notes = append(notes, fmt.Sprintf("[page cut at %d HTML elements before conversion]", maxHTMLElements))
	}
	if n := utf8.RuneCountInString(text); n > maxChars {
		text = cutRunes(text, maxChars)
		notes = append(notes, fmt.Sprintf("[content cut at %d of %d characters; pass maxChars to see more]", maxChars, n))
	}
	out := head.String() + "\n" + text
	for _, n := range notes {
		out += "\n\n" + n
	}
	return TextResult(out), nil
}

// fetchError turns a client error into the script-facing error: our own
// refusals keep their message, a timeout says so, a cancelled call returns
// the caller's context error.
func (t *webfetchTool) fetchError(ctx context.Context, u *url.URL, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return &toolError{msg: fmt.Sprintf("webfetch %s: timed out after %s", u.Redacted(), t.timeout), cause: context.DeadlineExceeded}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &toolError{msg: fmt.Sprintf("webfetch %s: %s", u.Redacted(), err), cause: err}
}

func binaryRefused(u *url.URL, mediaType string) error {
	return newError(ErrBinary, "webfetch %s: binary content (%s) cannot be shown as text", u.Redacted(), mediaType)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func urlReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func cutRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// maxHTMLElements bounds the elements of a page that are parsed and
// converted: the tree and the conversion cost ~500 bytes per element, so
// the 5 MiB body cap alone would let one page of empty tags cost ~190 MiB
// (and a script can serve one from loopback).
const maxHTMLElements = 20000

// limitElements cuts page before its (max+1)th start tag, scanning with
// the tokenizer, which builds no tree.
func limitElements(page string, max int) (string, bool) {
	z := html.NewTokenizer(strings.NewReader(page))
	offset, n := 0, 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return page, false
		}
		if tt == html.StartTagToken || tt == html.SelfClosingTagToken {
			if n++; n > max {
				return page[:offset], true
			}
		}
		offset += len(z.Raw())
	}
}
