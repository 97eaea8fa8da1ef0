package sweep

import "time"

// KillSessions kills every live process whose session is one of ids (and,
// with groups, every one whose process group is), pass after pass until
// a pass finds no member at all, or, once one was seen, until two passes
// in a row find no live member and no new zombie; or until within has
// passed (and at least minSweepPasses were made). The
// caller must keep each id pinned while it sweeps (an unreaped zombie
// leader does, as does any live member), so that no stranger can have
// taken the id: only a process whose stat names the id is signalled, and
// through a pidfd opened before that stat was read, so a pid reused in
// between is never hit.
func KillSessions(ids []int, groups bool, within time.Duration) SweepResult {
	return killSessions(ids, groups, 0, within)
}
