package introspect

// Request asks the introspect actor for the snapshot; it answers *Reply.
type Request struct{}

// Reply is the snapshot, or Err (wrapping ErrUnavailable) when the
// registry did not answer.
type Reply struct {
	Snapshot Snapshot
	Err      error
}
