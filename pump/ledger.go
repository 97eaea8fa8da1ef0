package pump

// ClaimKind is what the claim ledger knows about one spent call slot
// (docs/protocol.md, Claim markers, the ledger, and recovery).
type ClaimKind string

// The ledger kinds, in the order a request can pass through them: a
// reservation is refined by exactly one disposition.
const (
	ClaimReserved    ClaimKind = "reserved"
	ClaimInvalid     ClaimKind = "invalid"
	ClaimUnknownTool ClaimKind = "unknown_tool"
	ClaimDenied      ClaimKind = "denied"
	ClaimClaimed     ClaimKind = "claimed"
)

// LedgerEntry is the latest kind recorded for an id; Tool is empty for
// reserved and invalid.
type LedgerEntry struct {
	Kind ClaimKind
	Tool string
}

// Ledger is the host-side half of a claim: id → latest entry, kept where
// the script cannot reach it. A later entry for an id replaces the earlier.
type Ledger map[int64]LedgerEntry

// Record stores an entry; its signature fits Config.OnClaim for an owner
// that serialises calls.
func (l Ledger) Record(id int64, kind ClaimKind, tool string) {
	l[id] = LedgerEntry{Kind: kind, Tool: tool}
}

// feedLedger calls the hook, swallowing its panics: a broken ledger must
// not stop the sweep (the sweep's own accounting still holds).
func feedLedger(cfg *Config, id int64, kind ClaimKind, tool string) {
	if cfg.OnClaim == nil {
		return
	}
	defer func() { _ = recover() }()
	cfg.OnClaim(id, kind, tool)
}
