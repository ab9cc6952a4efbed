// Package console is the terminal adapter behind `baton chat`: one
// interactive thread in which each line is a message to core's conversation
// service, progress is printed as the job runs, questions are asked inline and
// answered by the next line, a tool call waiting for approval is shown with
// a `[y]es / [n]o / [a]lways` prompt answered the same way, and the in-thread
// `!` commands, `/new` and `/quit` work as on the chat platforms. It uses the
// same store and queue as the other adapters and never imports the queue
// package itself. `baton run` on a terminal asks approvals with the same
// prompt (AnswerPrompt, ParseAnswer).
package console
