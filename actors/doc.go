// Package actors builds the runtime's supervision tree on protoactor-go:
//
//	kernels subtree (all-for-one)
//	├── workers   dynamic supervisor of temporary kernel workers (never restarted)
//	└── registry  key → kernel, owners, generations, admission, reaping
//
// beside it, as root children restarted on their own, the approval broker
// and the introspect actor (which answers snapshots by asking the
// registry), and the owner actors of registry.Client.Attach. Each
// worker's exit report (why its kernel ended) is handed to the registry,
// so that session telemetry names the reason. A registry crash takes
// every kernel down with it: the subtree restarts both children, and
// restarting the workers supervisor stops every worker, which stops its
// interpreter.
//
// Tree exports the handles of its actors (the registry Client, the
// approval Broker, the introspect Client), never the actor system or a
// PID. Kernel boots run on the registry's start goroutines; only the
// spawn of each worker actor passes through the workers supervisor, so
// a slow boot holds neither the registry nor the supervisor.
//
// The package owns only the wiring (who spawns whom, which strategy); it
// must not hold kernel, registry or ledger state itself.
//
// It is the runtime's own machinery, not an embedder's API: an embedder
// uses executecode, config, tools, telemetry and approval.Approver. Its
// exported names exist for sibling packages and carry no compatibility
// promise; they may change in any release.
package actors
