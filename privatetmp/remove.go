package privatetmp

import (
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/internal/privfs"
)

// RemoveLimit is the entry-visit budget of one teardown (docs/protocol.md,
// Layout and teardown): a script that planted a huge tree cannot stall its
// owner in an unbounded rm -rf; whatever is left stays owner-only under the
// private root.
const RemoveLimit = 10000

// Teardown labels name the tree in the limit warning.
const (
	LabelWorkspace  = "execute_code workspace"
	LabelCellBridge = "execute_code cell bridge"
)

// RemoveBounded removes the tree at path with an iterative post-order walk
// that never follows a symlink, visiting at most limit entries: an entry
// costs one visit when it is examined (a directory is listed then), and a
// directory one more when its rmdir is attempted. complete is false when
// the budget ran out first; the remainder stays in place. See
// privfs.RemoveBounded, which the guard shares.
func RemoveBounded(path string, limit int) (complete bool, err error) {
	return privfs.RemoveBounded(path, limit)
}

// Teardown removes a workspace or bridge tree with RemoveLimit and warns,
// naming only the label, when the limit left a remainder behind. It reports
// whether the tree is gone.
func Teardown(path, label string, logger *zerolog.Logger) bool {
	complete, err := RemoveBounded(path, RemoveLimit)
	log := loggerOrNop(logger)
	if !complete {
		log.Warn().Int("limit", RemoveLimit).
			Msg(label + " teardown hit the entry limit; remainder left under the private root")
		return false
	}
	if err != nil {
		log.Warn().Msg(label + " teardown left entries it could not remove under the private root")
		return false
	}
	return true
}

func loggerOrNop(l *zerolog.Logger) *zerolog.Logger {
	if l == nil {
		nop := zerolog.Nop()
		return &nop
	}
	return l
}
