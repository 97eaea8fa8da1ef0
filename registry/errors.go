package registry

import "errors"

// Errors callers branch on.
var (
	// ErrCapacityExhausted: the live-kernel cap is reached and no kernel
	// can be evicted (none is idle, unleased and quiescent).
	ErrCapacityExhausted = errors.New("kernel capacity exhausted")
	// ErrStartupFailed: the worker for a new kernel could not be started.
	ErrStartupFailed = errors.New("kernel startup failed")
	// ErrInvalidKey: NewKey refused its input; the message names the field.
	ErrInvalidKey = errors.New("invalid kernel key")
	// ErrInvalidLease: a release named a lease the registry never issued,
	// or a forged one.
	ErrInvalidLease = errors.New("invalid lease")
	// ErrInvalidRequest: a request lacked an owner, a caller or a complete
	// key, or carried a negative bound.
	ErrInvalidRequest = errors.New("invalid registry request")
	// ErrStopFailed: a reset could not confirm that the old kernel's
	// worker is gone (the stop_failed fallback).
	ErrStopFailed = errors.New("kernel stop not confirmed")
	// ErrUnavailable: the registry did not answer (it is stopped, or the
	// wait ran out), or it stopped with the request unanswered.
	ErrUnavailable = errors.New("kernel registry unavailable")
	// ErrShutdown: StopAll arrived while the acquire waited; the kernel
	// it was waiting for, if one started, is stopped with the rest.
	ErrShutdown = errors.New("kernels shutting down")
	// ErrOwnerGone is the cause of a lease Context cancelled because the
	// lease's owner detached or died.
	ErrOwnerGone = errors.New("kernel owner gone")
	// errLeaseEnded is the cause of a lease Context cancelled by release.
	errLeaseEnded = errors.New("lease released")
	// errRegistryStopped is the cause of a lease Context cancelled because
	// the registry stopped.
	errRegistryStopped = errors.New("registry stopped")
)
