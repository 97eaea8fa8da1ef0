package pump

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// textFrameSlack is what a frame may exceed the text budget by and still
// be read: the budget itself decides whether it fits.
const textFrameSlack = 256

// ReadTextBlocks returns the script's text() blocks in n order, read once
// after the script ended from dir, whose bridge token is
// token. A block is accepted when it is a regular file (never a link) of
// at most maxTextBytes+256 bytes named text-<n>-<mac>.json, whose MAC
// authenticates its body, holding a JSON object with a string "text", and
// its body still fits the budget; the charge is the body's byte length,
// the same currency the shim charged. Every text-*.json file that fails
// the name or the MAC is refused: onRefused (which may be nil) is told of
// each, and it is never charged. A skipped block does not stop the scan.
// Files are left in place for teardown.
func ReadTextBlocks(dir, token string, maxTextBytes int, onRefused func()) []string {
	names := readNames(dir, textPrefix)
	var frames []entry
	for _, name := range names {
		if strings.HasPrefix(name, textPrefix) && strings.HasSuffix(name, jsonSuffix) {
			frames = append(frames, newFrameEntry(name, textPrefix, 0))
		}
	}
	sortEntries(frames)

	blocks := []string{}
	var used int64
	limit := int64(maxTextBytes)
	for _, e := range frames {
		body, err := readBounded(filepath.Join(dir, e.name), false, limit+textFrameSlack)
		if !e.valid || err != nil || !validMAC(token, KindText, e.num, body, e.mac) {
			observe(onRefused)
			continue
		}
		if !utf8.Valid(body) {
			continue
		}
		var fields map[string]json.RawMessage
		var text string
		if json.Unmarshal(body, &fields) != nil || !isJSONString(fields["text"]) || json.Unmarshal(fields["text"], &text) != nil {
			continue
		}
		if charge := int64(len(body)); used+charge <= limit {
			used += charge
			blocks = append(blocks, text)
		}
	}
	return blocks
}

// readNames lists the names in dir that begin with prefix, in one pass of
// raw getdents64; an unreadable directory has no frames.
func readNames(dir, prefix string) []string {
	var names []string
	err := scanDir(dir, func(name []byte, _ byte) error {
		if bytes.HasPrefix(name, []byte(prefix)) {
			names = append(names, string(name))
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return names
}
