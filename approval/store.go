package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// anyArgs is the args key of a tool-wide grant; an exact key is a hex
// digest and never empty.
const anyArgs = ""

// grantKey names one stored approval: the scope, its owner (the session
// or agent id; empty for global), the tool and the argument hash.
type grantKey struct {
	scope Decision
	owner string
	tool  string
	args  string
}

// maxStored bounds the stored approvals of one runtime: session and agent
// grants would otherwise pile up for as long as the host lives. Past it the
// oldest grant goes, and its next call is simply asked again.
const maxStored = 10000

// store holds the stored approvals in the order they were granted; it
// belongs to the broker actor.
type store struct {
	grants map[grantKey]struct{}
	order  []grantKey // oldest first; order[head:] are the live ones
	head   int
}

func newStore() *store { return &store{grants: map[grantKey]struct{}{}} }

// put stores k, dropping the oldest grant past maxStored.
func (s *store) put(k grantKey) {
	if _, ok := s.grants[k]; ok {
		return
	}
	s.grants[k] = struct{}{}
	s.order = append(s.order, k)
	if len(s.grants) > maxStored {
		delete(s.grants, s.order[s.head])
		s.order[s.head] = grantKey{}
		s.head++
	}
	// Compact once the dropped prefix is the larger part.
	if s.head > len(s.order)/2 {
		s.order = append([]grantKey(nil), s.order[s.head:]...)
		s.head = 0
	}
}

func (s *store) has(k grantKey) bool {
	_, ok := s.grants[k]
	return ok
}

func (s *store) len() int { return len(s.grants) }

// lookup returns the scope of the stored approval that answers a call,
// global before agent before session, exact arguments before tool-wide.
func (s *store) lookup(tool, hash, sessionID, agentID string) (Decision, bool) {
	for _, sc := range [...]struct {
		scope Decision
		owner string
	}{{ApproveGlobal, ""}, {ApproveAgent, agentID}, {ApproveSession, sessionID}} {
		if sc.scope != ApproveGlobal && sc.owner == "" {
			continue
		}
		for _, args := range [...]string{hash, anyArgs} {
			if s.has(grantKey{scope: sc.scope, owner: sc.owner, tool: tool, args: args}) {
				return sc.scope, true
			}
		}
	}
	return "", false
}

// install stores the approval a winning decision grants. approve_once and
// deny store nothing, and so does a session or agent scope without its
// owner: an approval nobody can be named for must not answer everyone
// else who also lacks one.
func (s *store) install(d Decision, tool, args, sessionID, agentID string) {
	var owner string
	switch d {
	case ApproveGlobal:
	case ApproveAgent:
		owner = agentID
	case ApproveSession:
		owner = sessionID
	default:
		return
	}
	if d != ApproveGlobal && owner == "" {
		return
	}
	s.put(grantKey{scope: d, owner: owner, tool: tool, args: args})
}

// argsHash is the hash of the arguments' canonical JSON (encoding/json
// sorts map keys); nil and empty arguments hash alike. Arguments JSON
// cannot encode fall back to their printed form, which also sorts keys.
func argsHash(args map[string]any) string {
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(fmt.Sprintf("unencodable:%#v", args))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
