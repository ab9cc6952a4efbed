// Package e2e holds Baton's whole-system tests: a real SQLite store, the
// in-process queue, a worker pool running the engine over real tools and the
// scripted LLM server, the conversation service, and the adapters in front
// of fakes of the chat platforms.
//
// They live here, beside the wiring in bot, because they need the queue:
// nothing under core or adapters may depend on it, test code included
// (bot/layout_test.go). The package has no code of its own; nothing imports it.
package e2e
