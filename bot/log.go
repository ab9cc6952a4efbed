package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger builds the process's logger from log.format and log.level,
// writing to w. It is the only place a slog.Handler is chosen; everything
// below bot receives the *slog.Logger it returns.
func newLogger(cfg LogConfig, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, &ConfigError{Key: "log.level", Msg: fmt.Sprintf("must be one of debug | info | warn | error, got %q", cfg.Level)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.Format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, &ConfigError{Key: "log.format", Msg: fmt.Sprintf("must be one of text | json, got %q", cfg.Format)}
	}
}
