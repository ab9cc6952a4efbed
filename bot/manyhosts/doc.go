//go:build linux

// Package manyhosts tests Baton as it runs on several hosts: gateways and
// workers as separate processes of the built binary, each with its own
// data_dir, sharing PostgreSQL, Redis and one workspace root, while
// processes are killed, the database restarts and a worker's network
// link is cut.
//
// Where the test runs as root and `ip netns` works, every process, Redis
// and PostgreSQL run in network namespaces of their own, joined by veth
// pairs to a bridge, so that no two share a loopback; elsewhere they share
// 127.0.0.1 and the link cut is left out. The package has no code of its
// own; nothing imports it.
package manyhosts
