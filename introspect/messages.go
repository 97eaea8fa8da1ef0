package introspect

// snapshotRequest asks the introspect actor for the snapshot; it answers
// *snapshotReply.
type snapshotRequest struct{}

// snapshotReply is the snapshot, or Err (wrapping ErrUnavailable) when the
// registry did not answer.
type snapshotReply struct {
	Snapshot Snapshot
	Err      error
}
