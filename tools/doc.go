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
// grep and find honour .gitignore files with git's rules (the root's and
// every directory's below it, deeper files winning; a directory named
// explicitly as path is searched even when ignored) and never enter .git;
// grep searches other dot files, find skips them unless hidden=true. Walks
// never follow symlinks. A file is binary when its first 8 KiB hold a NUL
// byte or are mostly invalid UTF-8; grep skips binary files, read refuses
// them (ErrBinary).
//
// # What a script can plant
//
// The tool root is script-writable, so everything in it is untrusted, and
// every bound below is announced by a note naming what was skipped:
//
//   - An ignore file over 1 MiB is skipped unread, and so is one whose
//     patterns would take the ignore files a walk holds at once (those of
//     the directories from the root down to where it is) past an
//     estimated 2 MiB of memory.
//   - A walk holds at most an estimated 4 MiB of directory listings at
//     once; a directory that does not fit is searched in part. It enters
//     at most 256 levels below the root.
//   - Nothing but a regular file is ever opened for reading: read and a
//     grep path naming a FIFO, a socket or a device fail with
//     ErrNotRegular naming its type, walks skip them (find lists them by
//     name), and an ignore file that is one is skipped. Opens use
//     O_NONBLOCK and O_NOCTTY and are checked again with fstat, so a
//     swap after the type check cannot block either.
//   - Reading checks ctx every 256 KiB, also inside one endless line, so
//     a sparse file of many gigabytes ends at the deadline.
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
// HTML); response headers and cookies are never shown. Only the first
// 20,000 elements of a page are parsed, so a page of empty tags cannot
// cost the host hundreds of MiB.
//
// Every call honours ctx: walks check it before each entry and every
// 1,024 ignore patterns matched, reads every 256 KiB, webfetch through
// the request context.
package tools
