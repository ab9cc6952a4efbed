// Package console is the terminal adapter behind `baton chat`: one
// interactive thread in which each line is a message to core's conversation
// service, progress is printed as the job runs, questions are asked inline and
// answered by the next line, a tool call waiting for approval is shown with
// a `[y]es / [n]o / [a]lways` prompt answered the same way, and the in-thread
// `!` commands, `/new` and `/quit` work as on the chat platforms (`!help`
// lists the console's own too). It uses the same store and queue as the
// other adapters and never imports the queue package itself.
//
// On a terminal (Options.Terminal) a Screen keeps a spinner with the
// elapsed time and the job's status above the prompt at the bottom, each
// tool call is one line cut to the width (the console is an
// engine.Stepper), and a file a job produced is listed with its path
// (chat.FilePoster). Elsewhere it writes plain lines without escape codes;
// with input that is not a terminal (Options.Echo) each line read is shown
// after its prompt and taken when the one before has settled.
//
// `baton run` uses the same pieces: a Screen on stderr for its spinner and
// tool lines (StepLine), with the model's text streamed to stdout when that
// is a terminal (ScreenOptions.Text, Screen.Stream), and the approval prompt
// (AnswerPrompt, ParseAnswer).
package console
