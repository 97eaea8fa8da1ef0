package actors

import "github.com/executecode/executecode/kernelworker"

// spawnWorker asks the workers supervisor to boot a kernel and adopt its
// worker actor as a child. Answered with spawnedWorker.
type spawnWorker struct{ opts kernelworker.Options }

type spawnedWorker struct {
	handle kernelworker.Handle
	err    error
}

// ownerActor is the do-nothing actor behind an Owner handle: its only job
// is to exist until Detach, so the registry can Watch it like any owner.
type ownerActor struct{}
