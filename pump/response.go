package pump

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/executecode/executecode/privatetmp"
)

// maxResponseRead bounds what recovery reads of a surviving response. The
// largest response the pump writes is a full result budget of characters
// escaped as \uXXXX pairs; a bigger file was not written by the pump.
const maxResponseRead = 64 << 20

// encodeResponse renders the compact response body. It cannot fail:
// strings are escaped by hand to pure ASCII (as python's json.dump does),
// with invalid UTF-8 replaced by U+FFFD, so the shim decodes the file the
// same way under any locale.
func encodeResponse(id int64, ok bool, text string) []byte {
	b := make([]byte, 0, len(text)+48)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	if ok {
		b = append(b, `,"ok":true,"content":`...)
	} else {
		b = append(b, `,"ok":false,"error":`...)
	}
	b = appendJSONString(b, text)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = appendU(b, rune(c))
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			b = appendU(appendU(b, hi), lo)
		} else {
			b = appendU(b, r) // utf8.RuneError for an invalid byte: U+FFFD
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// publish writes res-<id>.json through a private reservation and rename
// (a link planted at the name is replaced, not followed). A failure is
// logged and otherwise ignored: a dispatched id's surviving marker makes
// the next sweep's recovery answer it.
func (s *sweeper) publish(id int64, ok bool, text string) bool {
	if err := privatetmp.WriteFile(s.cfg.Dir, ResponseName(id), encodeResponse(id, ok, text)); err != nil {
		s.cfg.Logger.Warn().Msgf("execute_code rpc response write failed: %v", err)
		return false
	}
	return true
}

// answer publishes an error response and rings the shim.
func (s *sweeper) answer(id int64, msg string) {
	if s.publish(id, false, msg) {
		s.cfg.Bells.Ring()
	}
}

// ensureAnswered answers id with msg unless a regular response file
// already exists: a surviving answer keeps its exact wording.
func (s *sweeper) ensureAnswered(id int64, msg string) {
	if isRegular(s.path(ResponseName(id))) {
		return
	}
	s.answer(id, msg)
}

// readSuccess returns the content of a surviving successful response:
// a regular res-<id>.json that decodes to {"ok": true, "content": <string>}.
func (s *sweeper) readSuccess(id int64) (string, bool) {
	body, err := readBounded(s.path(ResponseName(id)), false, maxResponseRead)
	if err != nil {
		return "", false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || strings.TrimSpace(string(fields["ok"])) != "true" || !isJSONString(fields["content"]) {
		return "", false
	}
	var content string
	if json.Unmarshal(fields["content"], &content) != nil {
		return "", false
	}
	return content, true
}
