package actors

import "github.com/asynkron/protoactor-go/actor"

// spawnChild asks the workers supervisor to spawn a kernel's worker
// actor as its child. Answered with spawnedChild.
type spawnChild struct {
	props *actor.Props
	name  string
}

type spawnedChild struct {
	pid *actor.PID
	err error
}

// ownerActor is the do-nothing actor behind an Owner handle: its only job
// is to exist until Detach, so the registry can Watch it like any owner.
type ownerActor struct{}
