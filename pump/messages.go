package pump

import (
	"errors"
	"fmt"
)

// The exact texts scripts see in ToolError.
const (
	msgAuthFailed        = "rpc authentication failed"
	msgReplayed          = "rpc request already processed"
	msgInvalid           = "invalid rpc request"
	msgNotMarked         = "rpc dispatch could not be marked in-flight"
	msgInterrupted       = "rpc dispatch interrupted"
	msgRequestFailed     = "rpc request failed"
	msgNonText           = "[non-text content omitted]"
	msgDeniedNoTool      = "rpc tool call denied by policy"
	msgUnavailableNoTool = "tool is not available inside execute_code scripts"
)

// Sentinel errors of parseRequest; the sweep answers them with
// msgAuthFailed and msgInvalid respectively.
var (
	errAuth    = errors.New(msgAuthFailed)
	errInvalid = errors.New(msgInvalid)
)

func msgCallLimit(maxCalls int) string {
	return fmt.Sprintf("rpc call limit exceeded (max %d calls per script)", maxCalls)
}

func msgUnavailable(tool string) string {
	return fmt.Sprintf("tool '%s' is not available inside execute_code scripts", tool)
}

func msgInvalidJSON(tool string) string {
	return fmt.Sprintf("tool '%s' returned a JSON result that does not parse", tool)
}

func msgDenied(tool string) string {
	return fmt.Sprintf("tool '%s' denied by policy", tool)
}

// The phrases of an approval-blocked call, each answered
// as "<phrase> for '<tool>'".
const (
	phraseApprovalDenied   = "approval denied"
	phraseApprovalTimedOut = "approval timed out"
	phraseApprovalFailed   = "approval failed"
)

func msgApproval(phrase, tool string) string {
	return fmt.Sprintf("%s for '%s'", phrase, tool)
}

func msgBudget(size, remaining, limit int64) string {
	return fmt.Sprintf("rpc result byte budget exceeded (result %d bytes, %d bytes remaining of %d)", size, remaining, limit)
}
