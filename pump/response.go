package pump

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// maxResponseRead bounds what recovery reads of a surviving response. The
// largest response the pump writes is a full result budget of characters
// escaped as \uXXXX pairs; a bigger file was not written by the pump.
const maxResponseRead = 64 << 20

// responseHead is the MAC member every response starts with:
// {"mac":"<32 hex digits>", then the rest of the body. The MAC is over the
// body without it, "{" followed by what comes after the head.
const (
	responseHeadOpen = `{"mac":"`
	responseHeadLen  = len(responseHeadOpen) + macLen + len(`",`)
)

// encodeAnswer is encodeResponse for a result that may be JSON: asJSON
// adds "json": true, and the shim decodes the content string into python
// values.
func encodeAnswer(token string, id int64, ok, asJSON bool, text string) []byte {
	// The body proper is built after room for the head, whose last byte
	// is where the body's own "{" sits until the MAC over it is known.
	b := appendBody(make([]byte, responseHeadLen-1, responseHeadLen+len(text)+60), id, ok, asJSON, text)
	mac := FrameMAC(token, KindResponse, strconv.FormatInt(id, 10), b[responseHeadLen-1:])
	head := append(append([]byte(responseHeadOpen), mac...), '"', ',')
	copy(b, head)
	return b
}

// unauthenticatedAnswer is the body that answers a request which failed
// authentication: the same shape without a MAC member. Nobody who holds
// the token sent that request, so no shim believes the answer, and the
// pump does not take it for one: the script's own call of that id, should
// it come, still runs and its real answer replaces this. A MAC here would
// let anyone without the token have the pump authenticate an answer to
// any id.
func unauthenticatedAnswer(id int64) []byte {
	return appendBody(nil, id, false, false, msgAuthFailed)
}

func appendBody(b []byte, id int64, ok, asJSON bool, text string) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	if ok && asJSON {
		b = append(b, `,"ok":true,"json":true,"content":`...)
	} else if ok {
		b = append(b, `,"ok":true,"content":`...)
	} else {
		b = append(b, `,"ok":false,"error":`...)
	}
	b = appendJSONString(b, text)
	return append(b, '}')
}

// responseBody returns the body of a response file without its MAC member
// when the MAC authenticates it as the answer to id under token.
func responseBody(token string, id int64, file []byte) ([]byte, bool) {
	if len(file) < responseHeadLen || string(file[:len(responseHeadOpen)]) != responseHeadOpen ||
		string(file[responseHeadLen-2:responseHeadLen]) != `",` {
		return nil, false
	}
	mac := string(file[len(responseHeadOpen) : len(responseHeadOpen)+macLen])
	body := append([]byte{'{'}, file[responseHeadLen:]...)
	if !validMAC(token, KindResponse, strconv.FormatInt(id, 10), body, mac) {
		return nil, false
	}
	return body, true
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
// (a link or a forged file planted at the name is replaced, not
// followed). A failure is logged and otherwise ignored: a dispatched id's
// surviving marker makes the next sweep's recovery answer it.
func (s *sweeper) publish(id int64, ok, asJSON bool, text string) bool {
	if err := writeResponse(s.cfg.Dir, id, encodeAnswer(s.cfg.Token, id, ok, asJSON, text)); err != nil {
		s.cfg.Logger.Warn().Msgf("execute_code rpc response write failed: %v", err)
		return false
	}
	return true
}

// answer publishes an error response and rings the shim.
func (s *sweeper) answer(id int64, msg string) {
	if s.publish(id, false, false, msg) {
		s.cfg.Bells.RingFor(id)
	}
}

// refuseUnauthenticated answers a request that failed authentication,
// unless something already sits at its response name: such a request
// must never replace a real answer. The answer carries no MAC (see
// unauthenticatedAnswer).
func (s *sweeper) refuseUnauthenticated(id int64) {
	if isRegular(s.path(responseName(id))) {
		return
	}
	if err := writeResponse(s.cfg.Dir, id, unauthenticatedAnswer(id)); err != nil {
		s.cfg.Logger.Warn().Msgf("execute_code rpc response write failed: %v", err)
		return
	}
	s.cfg.Bells.RingFor(id)
}

// answered reports whether id has an authenticated response: a regular
// res-<id>.json (never a link) whose MAC holds. Anything else at the name,
// a file another session planted included, is no answer, and the next
// publication replaces it.
func (s *sweeper) answered(id int64) bool {
	_, ok := s.readResponse(id)
	return ok
}

// ensureAnswered answers id with msg unless an authenticated response
// already exists: a surviving answer keeps its exact wording.
func (s *sweeper) ensureAnswered(id int64, msg string) {
	if s.answered(id) {
		return
	}
	s.answer(id, msg)
}

// readResponse returns the body of id's authenticated response.
func (s *sweeper) readResponse(id int64) ([]byte, bool) {
	file, err := readBounded(s.path(responseName(id)), false, maxResponseRead)
	if err != nil {
		return nil, false
	}
	return responseBody(s.cfg.Token, id, file)
}

// readSuccess returns the content of a surviving successful response:
// an authenticated res-<id>.json that decodes to {"ok": true, "content":
// <string>}.
func (s *sweeper) readSuccess(id int64) (string, bool) {
	body, ok := s.readResponse(id)
	if !ok {
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

// writeResponse publishes res-<id>.json as privatetmp.WriteFile does,
// through a hidden reservation (.res-<id>-XXXXXXXXXX, created exclusively
// at 0600 without following a link) renamed over the name, in five system
// calls: the reservation never enters the runtime's poller, and it is not
// checked after its creation, since O_EXCL in the bridge's own 0700
// directory makes it this process's new file and a umask can only take
// permissions away. Its suffix needs to be unpredictable to the script,
// which could otherwise plant the names ahead, not secret: the runtime's
// per-thread ChaCha8 generator is that, without a system call.
func writeResponse(dir string, id int64, data []byte) error {
	final := dir + "/" + responseName(id)
	var name [64]byte
	for range reserveAttempts {
		tmp := strconv.AppendInt(append(append(name[:0], dir...), "/."+KindResponse+"-"...), id, 10)
		tmp = appendSuffix(append(tmp, '-'))
		path := string(tmp)
		fd, err := ignoringEINTR(func() (int, error) {
			return unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		})
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", responseName(id), &fs.PathError{Op: "open", Path: path, Err: err})
		}
		werr := writeAll(fd, data)
		if cerr := unix.Close(fd); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = unix.Rename(path, final)
		}
		if werr != nil {
			_ = unix.Unlink(path)
			return fmt.Errorf("write %s: %w", responseName(id), werr)
		}
		return nil
	}
	return fmt.Errorf("write %s: no free reservation after %d attempts", responseName(id), reserveAttempts)
}

// reserveAttempts is privatetmp's bound on reservation retries.
const reserveAttempts = 100

const suffixAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// appendSuffix appends ten characters drawn uniformly from suffixAlphabet.
func appendSuffix(b []byte) []byte {
	for range 10 {
		b = append(b, suffixAlphabet[rand.IntN(len(suffixAlphabet))])
	}
	return b
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := ignoringEINTR(func() (int, error) { return unix.Write(fd, data) })
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		data = data[n:]
	}
	return nil
}
