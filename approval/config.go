package approval

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/executecode/executecode/telemetry"
)

// Config configures the broker actor.
type Config struct {
	// Approver is asked for every prompt; nil means prompts wait for
	// Resolve, Cancel or their timeout.
	Approver  Approver
	Telemetry *telemetry.Bus
	Logger    *zerolog.Logger
	// Now is the clock of prompt ages in debug logs.
	Now func() time.Time
	// Grants are standing, tool-wide approvals the broker holds from its
	// start (and again after a restart).
	Grants []Grant

	// watchHook, when set (tests), sees every step of every watcher.
	watchHook func(watchStep)
}

// Grant approves Tool with any arguments at Scope: ApproveGlobal for
// everyone, ApproveAgent for the agent Owner, ApproveSession for the
// session Owner. Grants of another scope, or without the owner their
// scope needs, are ignored.
type Grant struct {
	Tool  string
	Scope Decision
	Owner string
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	return c
}

// Props builds the broker actor's props. Its watchers are temporary
// children: a failing watcher is stopped, never restarted.
func Props(cfg Config) *actor.Props {
	cfg = cfg.withDefaults()
	return actor.PropsFromProducer(func() actor.Actor { return newBrokerActor(cfg) },
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })))
}
