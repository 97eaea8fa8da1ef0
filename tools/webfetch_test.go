package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testPage = `<!doctype html>
<html><head><title>The  Test Page</title><style>body{color:red}</style>
<script>var secret = "do not show";</script></head>
<body>
<h1>Heading</h1>
<p>Some <strong>bold</strong> text with a <a href="/other">relative link</a>.</p>
<ul><li>one</li><li>two</li></ul>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre>line 1
  line 2</pre>
</body></html>`

// webServer serves fixed routes on 127.0.0.1; every handler returns when
// its request ends so Close never waits on it.
func webServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "cookie-value-xyz"})
		w.Header().Set("X-Secret-Header", "header-value-xyz")
		fmt.Fprint(w, testPage)
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "just *text*\n<b>not html</b>\n")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"a": 1}`)
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=ISO-8859-1")
		w.Write([]byte("caf\xe9"))
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
	})
	mux.HandleFunc("/octet-binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte("\x00\x01\x02\x03"))
	})
	mux.HandleFunc("/octet-text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		fmt.Fprint(w, "# README\nplain words\n")
	})
	mux.HandleFunc("/untyped", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		fmt.Fprint(w, "<html><body><p>sniffed</p></body></html>")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("0123456789", 1000))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/to-page", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/hops/", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/hops/"), "%d", &n)
		if n == 0 {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hops/%d", n-1), http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newFetch(t *testing.T, opts Options) Tool {
	t.Helper()
	opts.AllowPrivateNetworks = true
	tool, err := NewWebfetch(opts)
	require.NoError(t, err)
	return tool
}

func TestWebfetchConvertsHTMLToMarkdown(t *testing.T) {
	srv := webServer(t)
	res, err := newFetch(t, Options{}).Execute(context.Background(), map[string]any{"url": srv.URL + "/page"})
	require.NoError(t, err)
	assert.True(t, res.Untrusted)
	require.Len(t, res.Content, 1)
	got := res.Content[0].Text
	assert.True(t, strings.HasPrefix(got, "URL: "+srv.URL+"/page\nContent-Type: text/html\nTitle: The Test Page\n\n"), got)
	assert.Contains(t, got, "# Heading")
	assert.Contains(t, got, "**bold**")
	assert.Contains(t, got, "["+"relative link]("+srv.URL+"/other)", "relative links resolve against the page URL")
	assert.Contains(t, got, "- one\n- two")
	assert.Contains(t, got, "| k | v |")
	assert.NotContains(t, got, "do not show")
	assert.NotContains(t, got, "color:red")
	assert.NotContains(t, got, "cookie-value-xyz")
	assert.NotContains(t, got, "header-value-xyz")
}

func TestWebfetchTextModeStripsMarkup(t *testing.T) {
	srv := webServer(t)
	got, err := call(t, newFetch(t, Options{}), map[string]any{"url": srv.URL + "/page", "extractMode": "text"})
	require.NoError(t, err)
	want := "URL: " + srv.URL + "/page\nContent-Type: text/html\nTitle: The Test Page\n\n" +
		"Heading\n\nSome bold text with a relative link.\n\n- one\n- two\n\nk\tv\na\t1\n\nline 1\n  line 2"
	assert.Equal(t, want, got)
}

func TestWebfetchReturnsTextTypesAsTheyAre(t *testing.T) {
	srv := webServer(t)
	fetch := newFetch(t, Options{})
	tests := []struct {
		path, mode, want string
	}{
		{"/plain", "", "Content-Type: text/plain\n\njust *text*\n<b>not html</b>\n"},
		{"/plain", "text", "Content-Type: text/plain\n\njust *text*\n<b>not html</b>\n"},
		{"/json", "", "Content-Type: application/json\n\n{\"a\": 1}"},
		{"/latin1", "", "Content-Type: text/plain\n\ncafé"},
		{"/octet-text", "", "Content-Type: application/octet-stream\n\n# README\nplain words\n"},
		{"/untyped", "text", "Content-Type: text/html\n\nsniffed"},
		{"/to-page", "text", "Content-Type: text/html\nTitle: The Test Page\n\nHeading"},
		{"/hops/5", "", "Content-Type: text/plain\n\narrived"},
	}
	for _, tc := range tests {
		t.Run(tc.path+" "+tc.mode, func(t *testing.T) {
			params := map[string]any{"url": srv.URL + tc.path}
			if tc.mode != "" {
				params["extractMode"] = tc.mode
			}
			got, err := call(t, fetch, params)
			require.NoError(t, err)
			_, body, ok := strings.Cut(got, "\n")
			require.True(t, ok)
			assert.True(t, strings.HasPrefix(body, tc.want), "got %q", got)
		})
	}
}

func TestWebfetchReportsTheFinalURLAfterRedirects(t *testing.T) {
	srv := webServer(t)
	got, err := call(t, newFetch(t, Options{}), map[string]any{"url": srv.URL + "/to-page"})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(got, "URL: "+srv.URL+"/page\n"), got)
}

func TestWebfetchCutsContentAndBody(t *testing.T) {
	srv := webServer(t)
	got, err := call(t, newFetch(t, Options{}), map[string]any{"url": srv.URL + "/big", "maxChars": 25.0})
	require.NoError(t, err)
	assert.Equal(t, "URL: "+srv.URL+"/big\nContent-Type: text/plain\n\n0123456789012345678901234\n\n[content cut at 25 of 10000 characters; pass maxChars to see more]", got)

	got, err = call(t, newFetch(t, Options{FetchMaxBytes: 100}), map[string]any{"url": srv.URL + "/big"})
	require.NoError(t, err)
	assert.Equal(t, "URL: "+srv.URL+"/big\nContent-Type: text/plain\n\n"+strings.Repeat("0123456789", 10)+"\n\n[response body cut at 100 bytes]", got)
}

func TestWebfetchRefuses(t *testing.T) {
	srv := webServer(t)
	fetch := newFetch(t, Options{FetchTimeout: 200 * time.Millisecond})
	tests := []struct {
		name    string
		params  map[string]any
		kind    error
		message string
	}{
		{"file scheme", map[string]any{"url": "file:///etc/passwd"}, ErrNotAllowed, `webfetch only fetches http and https URLs, not "file"`},
		{"ftp scheme", map[string]any{"url": "ftp://example.com/x"}, ErrNotAllowed, `not "ftp"`},
		{"no scheme", map[string]any{"url": "example.com/x"}, ErrNotAllowed, "has no scheme"},
		{"redirect to file", map[string]any{"url": srv.URL + "/to-file"}, ErrNotAllowed, `not "file"`},
		{"too many redirects", map[string]any{"url": srv.URL + "/hops/6"}, nil, "stopped after 5 redirects"},
		{"redirect loop", map[string]any{"url": srv.URL + "/loop"}, nil, "stopped after 5 redirects"},
		{"binary content type", map[string]any{"url": srv.URL + "/png"}, ErrBinary, "binary content (image/png)"},
		{"binary octet-stream", map[string]any{"url": srv.URL + "/octet-binary"}, ErrBinary, "binary content (application/octet-stream)"},
		{"http error status", map[string]any{"url": srv.URL + "/missing"}, nil, "HTTP 404 Not Found"},
		{"timeout", map[string]any{"url": srv.URL + "/slow"}, context.DeadlineExceeded, "timed out after 200ms"},
		{"missing url", map[string]any{}, ErrBadParam, `parameter "url" of webfetch is required`},
		{"url not a string", map[string]any{"url": 1.0}, ErrBadParam, `"url" of webfetch must be a string`},
		{"bad extractMode", map[string]any{"url": srv.URL, "extractMode": "html"}, ErrBadParam, `"extractMode" of webfetch must be "markdown" or "text", got "html"`},
		{"maxChars as string", map[string]any{"url": srv.URL, "maxChars": "10"}, ErrBadParam, `"maxChars" of webfetch must be an integer`},
		{"maxChars zero", map[string]any{"url": srv.URL, "maxChars": 0.0}, ErrBadParam, `"maxChars" of webfetch must be at least 1`},
		{"snake_case key gets a hint", map[string]any{"url": srv.URL, "max_chars": 10.0}, ErrBadParam, `unknown parameter "max_chars" (did you mean "maxChars"?) for webfetch`},
		{"url without host", map[string]any{"url": "http:///x"}, ErrBadParam, "has no host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fetch.Execute(context.Background(), tc.params)
			require.Error(t, err)
			if tc.kind != nil {
				assert.ErrorIs(t, err, tc.kind)
			}
			assert.Contains(t, err.Error(), tc.message)
			assert.True(t, res.Untrusted)
		})
	}
}

func TestWebfetchRefusesPrivateNetworksUnlessAllowed(t *testing.T) {
	srv := webServer(t)
	guarded, err := NewWebfetch(Options{})
	require.NoError(t, err)
	for _, u := range []string{
		srv.URL + "/plain",
		"http://localhost:1/",
		"http://[::1]:1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1/",
		"http://0.0.0.0:1/",
	} {
		_, err := call(t, guarded, map[string]any{"url": u})
		require.Error(t, err, u)
		assert.ErrorIs(t, err, ErrNotAllowed, u)
		assert.Contains(t, err.Error(), "not a public internet address", u)
	}

	// Behind the URL check, the default client's dialer refuses the
	// address it actually connects to (what a name resolves to, or where
	// a redirect leads).
	resp, err := guarded.(*webfetchTool).client.Get(srv.URL + "/plain")
	if resp != nil {
		resp.Body.Close()
	}
	assert.ErrorIs(t, err, ErrNotAllowed)

	got, err := call(t, newFetch(t, Options{}), map[string]any{"url": srv.URL + "/plain"})
	require.NoError(t, err)
	assert.Contains(t, got, "just *text*")
}

func TestWebfetchGuardChecksDialledAddresses(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "192.168.1.1:80", "[fd00::1]:80", "100.64.0.1:80", "[::ffff:127.0.0.1]:80"} {
		err := guardDial(context.Background(), "tcp", addr, nil)
		assert.ErrorIs(t, err, ErrNotAllowed, addr)
	}
	for _, addr := range []string{"93.184.216.34:80", "[2606:2800:220:1::1]:443", "8.8.8.8:53"} {
		assert.NoError(t, guardDial(context.Background(), "tcp", addr, nil), addr)
	}
}

func TestWebfetchUsesASuppliedClient(t *testing.T) {
	srv := webServer(t)
	client := srv.Client()
	fetch, err := NewWebfetch(Options{HTTPClient: client, AllowPrivateNetworks: true})
	require.NoError(t, err)
	got, err := call(t, fetch, map[string]any{"url": srv.URL + "/json"})
	require.NoError(t, err)
	assert.Contains(t, got, `{"a": 1}`)
	_, err = call(t, fetch, map[string]any{"url": srv.URL + "/to-file"})
	assert.ErrorIs(t, err, ErrNotAllowed, "the redirect policy applies to a supplied client too")
	assert.Nil(t, client.CheckRedirect, "the caller's client is not modified")
}

func TestWebfetchHonoursCancellation(t *testing.T) {
	srv := webServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newFetch(t, Options{}).Execute(ctx, map[string]any{"url": srv.URL + "/slow"})
	assert.ErrorIs(t, err, context.Canceled)
}

// A page of a million empty elements would cost the host ~100 MiB to
// parse and convert: it is cut, with a note, before the tree is built.
func TestWebfetchCutsAPageOfTooManyElements(t *testing.T) {
	page := "<html><body><p>start</p>" + strings.Repeat("<div><a href=x>a</a></div>", maxHTMLElements) + "<p>end</p></body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	res, err := newFetch(t, Options{}).Execute(context.Background(), map[string]any{"url": srv.URL, "extractMode": "text"})
	require.NoError(t, err)
	got := res.Content[0].Text
	assert.Contains(t, got, "start")
	assert.NotContains(t, got, "end")
	assert.True(t, strings.HasSuffix(got, fmt.Sprintf("[page cut at %d HTML elements before conversion]", maxHTMLElements)), got[len(got)-200:])
}
