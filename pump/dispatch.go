package pump

import (
	"context"
	"strings"
)

// dispatch runs the claims in waves of MaxParallel, in claim order. Each
// wave's calls run concurrently; the sweep awaits them in claim order and
// accounts and answers each as soon as it is awaited, so the result-byte
// budget is spent serially. The next wave starts only after the whole
// current wave finished.
//
// A Sender gate is handed each wave's calls from here, in claim order;
// any other gate runs each call on a goroutine of its own.
func (s *sweeper) dispatch(ctx context.Context, claims []claim) error {
	step := s.cfg.MaxParallel
	sender, sends := s.cfg.gate.(Sender)
	for start := 0; start < len(claims); start += step {
		if ctx.Err() != nil {
			s.abandon(claims[start:])
			return ctx.Err()
		}
		wave := claims[start:min(start+step, len(claims))]
		results := make([]<-chan Answer, len(wave))
		for i, c := range wave {
			if sends {
				results[i] = sendCall(ctx, sender, s.cfg.Logger, c)
				continue
			}
			// Buffered: a call finishing after its sweep was abandoned
			// never blocks.
			ch := make(chan Answer, 1)
			results[i] = ch
			s.bridge.tasks.add()
			go runCall(ctx, s.cfg.gate, s.cfg.Logger, s.bridge.tasks, c, ch)
		}
		for i, c := range wave {
			var o Answer
			select {
			case o = <-results[i]:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				s.abandon(claims[start+i:])
				return ctx.Err()
			}
			s.settle(c, o)
		}
	}
	return nil
}

// abandon is what a killed sweep leaves behind: claims charged (at claim
// time) and unanswered, their markers in place for recovery. Each counts
// as one error, so the figures equal what recovery charges a dead sweep's
// claims when its stats are lost instead.
func (s *sweeper) abandon(rest []claim) {
	s.abandoned += len(rest)
	s.stats.Errors += len(rest)
	if len(rest) > 0 {
		s.cfg.Logger.Debug().Int("claims", len(rest)).Msg("execute_code rpc sweep cancelled with claims in flight")
	}
}

// settle accounts one awaited call (docs/protocol.md, Budgets) and answers
// it; after a published answer the marker goes, then the shim is rung.
func (s *sweeper) settle(c claim, o Answer) {
	ok, text := s.stats.spend(o, c.tool, s.cfg.MaxResultBytes)
	if s.publish(c.id, ok, ok && o.JSON, text) {
		// The ring first: the script's wait ends with the answer, and the
		// marker's unlink is bookkeeping the sweep finishes meanwhile,
		// before it settles.
		s.cfg.Bells.RingFor(c.id)
		_ = s.remove(markerName(c.id))
		reportRoundTrip(&s.cfg, c.tool, c.claimed, ok, o.Blocked)
	} else {
		s.unanswered++ // its marker stays for recovery
	}
}

// spend accounts one answer of tool (docs/protocol.md, Budgets) and says
// what the script gets: ok and the content, or the error text. A
// successful text is made valid UTF-8 and charged to the result-byte
// budget of maxBytes; one that does not fit becomes the budget message
// and counts as an error. A blocked answer counts as a denial, any other
// failure as an error.
func (st *Stats) spend(a Answer, tool string, maxBytes int64) (ok bool, text string) {
	text = a.Text
	switch {
	case a.OK:
		// The script receives (and is charged for) valid UTF-8.
		text = strings.ToValidUTF8(text, "\uFFFD")
		size, remaining := int64(len(text)), maxBytes-st.Bytes
		if size > remaining {
			text = msgBudget(size, remaining, maxBytes)
			st.Errors++
		} else {
			ok = true
			st.Bytes += size
			st.useTool(tool)
			if a.Untrusted {
				st.Untrusted = true
			}
		}
	case a.Blocked:
		st.Denied++
	default:
		st.Errors++
		// The script holds the message as its ToolError.
		if a.Untrusted {
			st.Untrusted = true
		}
	}
	return ok, text
}
