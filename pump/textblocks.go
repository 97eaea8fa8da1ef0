package pump

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// textFrameSlack is what a frame may exceed the text budget by and still
// be read: the budget itself decides whether it fits.
const textFrameSlack = 256

// ReadTextBlocks returns the script's text() blocks in n order (bridge.md
// §5.9), read once after the script ended. A block is accepted when it is
// a regular file (never a link) of at most maxTextBytes+256 bytes holding
// a JSON object with a string "text", and its file body still fits the
// budget; the charge is the body's byte length, the same currency the
// shim charged. A skipped block does not stop the scan. Files are left in
// place for teardown.
func ReadTextBlocks(dir string, maxTextBytes int) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil
	}
	var frames []entry
	for _, name := range names {
		if strings.HasPrefix(name, textPrefix) && strings.HasSuffix(name, jsonSuffix) {
			if e := newEntry(name, textPrefix, jsonSuffix, 0); e.valid {
				frames = append(frames, e)
			}
		}
	}
	sortEntries(frames)

	blocks := []string{}
	var used int64
	limit := int64(maxTextBytes)
	for _, e := range frames {
		body, err := readBounded(filepath.Join(dir, e.name), false, limit+textFrameSlack)
		if err != nil || !utf8.Valid(body) {
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
