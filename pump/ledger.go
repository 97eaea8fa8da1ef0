package pump

// claimKind is what the claim ledger knows about one spent call slot
// (docs/protocol.md, Claim markers, the ledger, and recovery).
type claimKind string

// The ledger kinds, in the order a request can pass through them: a
// reservation is refined by exactly one disposition.
const (
	claimReserved    claimKind = "reserved"
	claimInvalid     claimKind = "invalid"
	claimUnknownTool claimKind = "unknown_tool"
	claimDenied      claimKind = "denied"
	claimClaimed     claimKind = "claimed"
)

// ledgerEntry is the latest kind recorded for an id; Tool is empty for
// reserved and invalid.
type ledgerEntry struct {
	Kind claimKind
	Tool string
}

// claimLedger is the host-side half of a claim: id → latest entry, kept where
// the script cannot reach it. A later entry for an id replaces the earlier.
type claimLedger map[int64]ledgerEntry

// Record stores an entry; its signature fits Config.onClaim for an owner
// that serialises calls.
func (l claimLedger) Record(id int64, kind claimKind, tool string) {
	l[id] = ledgerEntry{Kind: kind, Tool: tool}
}

// feedLedger calls the hook, swallowing its panics: a broken ledger must
// not stop the sweep (the sweep's own accounting still holds).
func feedLedger(cfg *Config, id int64, kind claimKind, tool string) {
	if cfg.onClaim == nil {
		return
	}
	defer func() { _ = recover() }()
	cfg.onClaim(id, kind, tool)
}
