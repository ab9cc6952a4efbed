package main

import (
	"context"
	"errors"

	"github.com/baton-bot/baton/core/egress"
)

// sandboxBridge runs `baton sandbox-bridge`: inside a command's sandbox,
// the relay from 127.0.0.1:3128 to the egress proxy's socket, with the
// command behind it (egress.Bridge). The sandbox starts it; people have
// no reason to.
func (m *Main) sandboxBridge(ctx context.Context, args []string) error {
	fs := m.newFlagSet(egress.BridgeSubcommand)
	var cfg egress.BridgeConfig
	fs.StringVar(&cfg.Socket, "socket", egress.BridgeSocket, "the egress proxy's Unix `socket`, as the sandbox shows it")
	fs.StringVar(&cfg.Listen, "listen", egress.BridgeAddr, "`address` to listen on, inside the sandbox")
	fs.StringVar(&cfg.Locale, "locale", "en", "the `locale` (en, ja) of what a client is told when the proxy cannot be reached")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg.Argv = fs.Args()
	if len(cfg.Argv) == 0 {
		return usageErr("baton %s: a command to run is required, after --", egress.BridgeSubcommand)
	}
	if code := egress.Bridge(cfg, m.Stderr); code != 0 {
		return &exitError{code: code, err: errors.New("the command behind the bridge failed"), reported: true}
	}
	return nil
}
