module github.com/baton-bot/baton

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/tiktoken-go/tokenizer v0.10.0
)

require github.com/dlclark/regexp2/v2 v2.5.1 // indirect
