// Package tools holds the helpers a script may call through the bridge
// (read, grep, find, ls, webfetch), each rooted at one directory, and the
// Tool interface an embedding host implements to supply its own.
//
// It owns path resolution against the root (no escape, also not through
// symlinks), result caps and the text shapes scripts see. It must not know
// about the bridge, the pump or python: it is called with decoded params and
// returns text or an error.
//
// # Parameters
//
// Params are JSON-decoded keyword arguments. Absent and null both mean
// "default". A value of the wrong type (a string where a number belongs, a
// fractional count), an out-of-range value or an unknown key is refused
// with an error wrapping ErrBadParam that names the parameter. Error
// messages are written for the script: they name paths as the script wrote
// them (root-relative when it wrote an absolute path inside the root) and
// never contain the host path of the root.
//
// # Paths
//
// Every path parameter is resolved against Options.Root; absolute paths are
// accepted. All symlinks are resolved first (a dangling one by its text),
// and the real path must lie inside the real root, else ErrEscapes; only
// then is a missing path ErrNotFound, so a script cannot probe outside the
// root. Files are then opened through an os.Root, which keeps every open
// inside the tree even if a path is swapped for a symlink meanwhile.
//
// # Shapes
//
// grep and find print paths relative to the root (not to their path
// parameter) so a result can be passed straight to read; ls prints names
// relative to the directory it lists. Every result is bounded: per-tool
// counts (read's limit, grep's and find's max_results, ls's max_entries)
// and a 1 MiB cap on any one result, each announced by a bracketed note on
// the last line(s), e.g. "[results capped at 100 matches]". "Nothing here"
// is a note too: "No matches found.", "No files found.",
// "(empty directory)", "(empty file)".
//
// grep and find honour .gitignore files (the root's and every directory's
// below it, deeper files winning; a directory named explicitly as path is
// searched even when ignored) and never enter .git; grep searches other dot
// files, find skips them unless hidden=true. Walks never follow symlinks.
// A file is binary when its first 8 KiB hold a NUL byte or are mostly
// invalid UTF-8; grep skips binary files, read refuses them (ErrBinary).
//
// # webfetch
//
// webfetch fetches http and https only (ErrNotAllowed otherwise, also for
// a redirect), follows at most 5 redirects, and marks every Result
// Untrusted. With AllowPrivateNetworks off (the zero value) it refuses
// loopback, private, link-local and other non-public addresses: an
// embedder gets the safe default, and a host where the tool is
// bash-equivalent anyway (the CLI) sets it. Output starts with
// "URL: <final url>" and "Content-Type: <media type>" (and "Title: " for
// HTML); response headers and cookies are never shown.
//
// Every call honours ctx: walks check it before each entry, reads every few
// thousand lines, webfetch through the request context.
package tools
