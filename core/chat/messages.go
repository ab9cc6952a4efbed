package chat

import (
	"strings"

	"github.com/baton-bot/baton/core/chattext"
	"github.com/dustin/go-humanize"
)

// texts are the bot's own words, by locale (en, ja). {name} placeholders
// are filled by say.
var texts = map[string]map[string]string{
	"en": {
		"help": "Mention me with a request and I work on it in this thread; reply here to answer my questions or to add to the request.\n" +
			"Commands: `!status`, `!abort` (or `!stop`, `!cancel`), `!retry`, `!piece NAME request` (pieces: {pieces}), `!new` (direct messages: start afresh), `!help`.",
		"unknown_command":    "I don't know the command `!{name}`.",
		"no_active_job":      "Nothing is running in this thread.",
		"no_task":            "This thread has no task yet: mention me with a request to start one.",
		"task_not_found":     "There is no task {task}.",
		"abort_requested":    "Stopping job #{job} as {who} asked.",
		"aborted":            "🛑 Job #{job} was aborted by {who}.",
		"not_allowed":        "Sorry, you are not allowed to use Baton here.",
		"not_allowed_abort":  "Only the person who started this task, or an admin, can do that.",
		"not_allowed_answer": "Only the person who started this task, or an admin, can answer its question.",
		"unknown_piece":      "There is no piece `{piece}`. Pieces: {pieces}.",
		"piece_needs_text":   "Say what to do after the piece name: `!piece {piece} your request`.",
		"busy":               "Job #{job} is still {state} in this thread; your message was added to it.",
		"retry_nothing":      "There is no failed or aborted job to retry in this thread.",
		"retry_started":      "Retrying job #{old} as job #{job}, from movement {movement}.",
		"new_task":           "Started afresh: your next message begins a new task.",
		"new_only_dm":        "`!new` works in direct messages; in a channel, mention me in a new thread.",
		"status":             "{state_icon} Task {task} — job #{job} {state}: piece {piece}, movement {movement} {count}/{max}, iteration {iteration}, {tokens} tokens, {elapsed}.{level}{children}",
		"status_none":        "Task {task} has no job yet.",
		"queue_position":     "Place {n} in the queue.",
		"list_none":          "No active tasks.",
		"claimed":            "⏳ Working on it — piece {piece}.",
		"progress":           "⏳ {piece}: movement {movement} {count}/{max}, iteration {iteration}, {tokens} tokens, {elapsed}.{level}",
		"compacted_note":     " Context compacted ×{n} to keep going.",
		"done":               "✅ Done — job #{job}.",
		"asking":             "❓ Waiting for an answer — reply in this thread.",
		"failed":             "❌ Job #{job} failed: {reason}",
		"waiting_children":   "⏳ Waiting for {n} subtasks:{children}",
		"too_long":           "(Your message was cut at {n} bytes.)",
		"file_refused":       "I could not take the file {name}: {reason}.",
		"file_input_broken":  "the task's input/ folder is no longer a folder of its workspace (something replaced it), so nothing was saved",
		"file_not_saved":     "saving it in the task's input/ folder failed",
		"sticker":            "[sticker: {name}]",
		"slash_other":        "This app answers `{command}` only; `{other}` is not one of its commands.",
		"upload_too_large":   "{file} ({size}) is over the {limit} upload limit and was not sent; it stays in the task's workspace.",
		"empty_request":      "(The message has no text: the person only mentioned Baton or only attached files. Look at the conversation and input/ to see what they need; ask if it is unclear.)",
	},
	"ja": {
		"help": "リクエストと一緒にメンションしてください。このスレッドで作業します。質問への回答や追加の依頼はこのスレッドに返信してください。\n" +
			"コマンド: `!status`、`!abort`（`!stop`、`!cancel`）、`!retry`、`!piece 名前 依頼`（ピース: {pieces}）、`!new`（DM で新しく始める）、`!help`。",
		"unknown_command":    "`!{name}` というコマンドはありません。",
		"no_active_job":      "このスレッドで実行中のジョブはありません。",
		"no_task":            "このスレッドにはまだタスクがありません。依頼と一緒にメンションしてください。",
		"task_not_found":     "タスク {task} はありません。",
		"abort_requested":    "{who} さんの依頼でジョブ #{job} を止めています。",
		"aborted":            "🛑 ジョブ #{job} は {who} さんが中止しました。",
		"not_allowed":        "申し訳ありませんが、ここでは Baton を使えません。",
		"not_allowed_abort":  "それができるのは、このタスクを始めた人か管理者だけです。",
		"not_allowed_answer": "このタスクの質問に答えられるのは、タスクを始めた人か管理者だけです。",
		"unknown_piece":      "ピース `{piece}` はありません。ピース: {pieces}。",
		"piece_needs_text":   "ピース名の後に依頼を書いてください: `!piece {piece} 依頼`。",
		"busy":               "このスレッドではジョブ #{job} がまだ {state} です。メッセージはそのジョブに追加しました。",
		"retry_nothing":      "このスレッドには再実行できる失敗・中止したジョブがありません。",
		"retry_started":      "ジョブ #{old} をジョブ #{job} として movement {movement} から再実行します。",
		"new_task":           "新しく始めます。次のメッセージから新しいタスクになります。",
		"new_only_dm":        "`!new` は DM で使えます。チャンネルでは新しいスレッドでメンションしてください。",
		"status":             "{state_icon} タスク {task} — ジョブ #{job} {state}: ピース {piece}、movement {movement} {count}/{max}、iteration {iteration}、{tokens} トークン、{elapsed}。{level}{children}",
		"status_none":        "タスク {task} にはまだジョブがありません。",
		"list_none":          "実行中のタスクはありません。",
		"queue_position":     "待ち行列の {n} 番目です。",
		"claimed":            "⏳ 作業中 — ピース {piece}。",
		"progress":           "⏳ {piece}: movement {movement} {count}/{max}、iteration {iteration}、{tokens} トークン、{elapsed}。{level}",
		"compacted_note":     " 続けるためにコンテキストを {n} 回圧縮しました。",
		"done":               "✅ 完了 — ジョブ #{job}。",
		"asking":             "❓ 回答待ち — このスレッドに返信してください。",
		"failed":             "❌ ジョブ #{job} は失敗しました: {reason}",
		"waiting_children":   "⏳ {n} 件のサブタスクを待っています:{children}",
		"too_long":           "（メッセージは {n} バイトで切りました。）",
		"file_refused":       "ファイル {name} を受け取れませんでした: {reason}。",
		"file_input_broken":  "タスクの input/ フォルダーがワークスペースのフォルダーではなくなっている（何かに置き換えられた）ため、保存しませんでした",
		"file_not_saved":     "タスクの input/ フォルダーへの保存に失敗しました",
		"sticker":            "[スタンプ: {name}]",
		"slash_other":        "このアプリが答えるのは `{command}` だけです。`{other}` はこのアプリのコマンドではありません。",
		"upload_too_large":   "{file}（{size}）はアップロードの上限 {limit} を超えるため送りませんでした。タスクのワークスペースに残っています。",
		"empty_request":      "（メッセージに本文がありません。Baton へのメンションだけ、またはファイルの添付だけです。やり取りと input/ を見て必要なことを判断し、不明なら質問してください。）",
	},
}

// Say returns the bot's text key in locale, with {name} placeholders
// filled from pairs, for the answers an adapter gives by itself (a slash
// command that is not Baton's). An unknown locale or key falls back to
// English, and an unknown key to "".
func Say(locale, key string, pairs ...string) string { return say(locale, key, pairs...) }

// UploadTooLarge is the note that tells a thread the file at rel (a path
// relative to the task's workspace, e.g. output/big.bin) of size bytes was
// not uploaded because it is over the limit of files.max_bytes. Sizes are
// shown in SI units ("39 MB"), as files.max_bytes is written; the path is
// made inert and one line (chattext.NeutralizeName).
func UploadTooLarge(locale, rel string, size, limit int64) string {
	return say(locale, "upload_too_large", "file", chattext.NeutralizeName(rel, chattext.Plain),
		"size", humanize.Bytes(uint64(max(size, 0))), "limit", humanize.Bytes(uint64(max(limit, 0))))
}

// say returns text key in locale with {name} placeholders filled from
// pairs (name, value, name, value, …).
func say(locale, key string, pairs ...string) string {
	m, ok := texts[locale]
	if !ok {
		m = texts["en"]
	}
	s, ok := m[key]
	if !ok {
		s = texts["en"][key]
	}
	r := make([]string, 0, len(pairs))
	for i := 0; i+1 < len(pairs); i += 2 {
		r = append(r, "{"+pairs[i]+"}", pairs[i+1])
	}
	return strings.NewReplacer(r...).Replace(s)
}
