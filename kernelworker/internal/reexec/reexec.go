// Package reexec is what this binary does when the runtime re-executes it
// through /proc/self/exe: become python as the launcher (rlimits, session,
// parent-death signal, SIGINT at default, then execve), or run as the
// host's guard (kill the sessions of a dead host's children, then remove
// its staging roots). Its init recognises either role and never returns
// from it. The session sweep (KillSessions) is shared with the host, which
// runs it at every interpreter's end.
//
// It is a package of its own, importing only the standard library,
// golang.org/x/sys/unix and internal/privfs (which imports nothing else
// either), because Go initialises packages in dependency and
// import-path order: here the role starts after about 70 small package
// initialisers instead of all of the host's (metrics, actors, protobuf),
// which saves every interpreter start and the guard milliseconds.
//
// The host's side (kernelworker's Spawner and guard) imports it for the
// names and the Spec it shares with the child, and for KillSessions.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver.
package reexec

import "os"

func init() {
	// Both the variable and argv[0] must say so: a variable alone may leak
	// into a user's environment, and the binary must then still be the CLI
	// (or the embedding host) it was started as.
	if len(os.Args) == 0 {
		return
	}
	switch {
	case os.Args[0] == LauncherArgv0 && os.Getenv(LauncherEnv) == "1":
		launch()
	case os.Args[0] == GuardArgv0 && os.Getenv(GuardEnv) == "1":
		guardMain()
	}
}
