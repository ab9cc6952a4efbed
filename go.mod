module github.com/baton-bot/baton

go 1.26.0
