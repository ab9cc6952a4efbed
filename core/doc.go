// Package core holds Baton's domain: tasks, comments, jobs and their states,
// and the ports (interfaces) that the rest of Baton implements — the store
// that is the system of record and the queue that dispatches jobs to workers.
//
// Package core imports only the standard library. Technology lives in
// subpackages (core/sqlite, core/worker, …) and in queue/; the bot package
// wires them together.
package core
