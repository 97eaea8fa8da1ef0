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
