package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-bot/baton/core/catalog"
	"github.com/baton-bot/baton/core/policy"
	"github.com/baton-bot/baton/core/tools"
)

// Tool is one tool of a server, offered to the model; it belongs to the
// session that listed it.
type Tool struct {
	s   *Session
	srv *server
	def toolDef
}

var (
	_ tools.Tool    = (*Tool)(nil)
	_ policy.Kinded = (*Tool)(nil)
)

// Name implements tools.Tool: mcp__<server>__<tool>.
func (t *Tool) Name() string { return t.def.name }

// Description implements tools.Tool: the server's description, capped.
func (t *Tool) Description(tx *catalog.Texts) string {
	if t.def.desc == "" {
		return tx.Fill("tools.mcp.no_description", "server", t.def.server)
	}
	return t.def.desc
}

// Schema implements tools.Tool: the server's input schema, adapted.
func (t *Tool) Schema(*catalog.Texts) json.RawMessage { return t.def.schema }

// PolicyKind implements policy.Kinded: a tool whose server says it only
// reads (readOnlyHint) is ExternalRead, any other External.
func (t *Tool) PolicyKind() policy.Kind {
	if t.def.readOnly {
		return policy.ExternalRead
	}
	return policy.External
}

// MeterLabel is the tool label of Baton's tool metrics for every MCP tool
// ("mcp"): server names and outcomes are counted by Meter.
func (t *Tool) MeterLabel() string { return "mcp" }

// Server returns the name of the tool's server; Remote the tool's name on
// it.
func (t *Tool) Server() string { return t.def.server }

// Remote returns the name the server knows the tool by.
func (t *Tool) Remote() string { return t.def.remote }

// ReadOnly reports whether the server says the tool only reads.
func (t *Tool) ReadOnly() bool { return t.def.readOnly }

// Call implements tools.Tool: it calls the tool on its server within the
// server's call timeout and turns what comes back into a result.
func (t *Tool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) tools.Result {
	start := time.Now()
	res, outcome, bytes := t.call(ctx, env, args)
	took := time.Since(start)
	if m := t.s.m.cfg.Meter; m != nil {
		m.MCPCall(t.def.server, outcome, took)
	}
	t.s.event("mcp_call", fmt.Sprintf("server=%s tool=%s took=%s bytes=%d outcome=%s",
		t.def.server, t.def.remote, took.Round(time.Millisecond), bytes, outcome))
	return res
}

func (t *Tool) call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, string, int) {
	tx := env.Texts
	red := t.srv.redact
	fail := func(outcome, key string, vars ...string) (tools.Result, string, int) {
		vars = append(vars, "server", t.def.server, "tool", t.def.remote)
		return tools.Result{Text: t.def.name + ": " + red.redact(tx.Fill(key, vars...)), IsError: true}, outcome, 0
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return fail(OutcomeProtocol, "tools.mcp.err.bad_arguments", "err", err.Error())
	}
	c, err := t.s.conn(ctx, t.srv)
	if err != nil {
		if ctx.Err() != nil {
			return fail(OutcomeUnavailable, "tools.err.cancelled")
		}
		return fail(OutcomeUnavailable, "tools.mcp.err.unavailable", "err", err.Error())
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer c.startCall(t.srv.cfg.CallTimeout, cancel)()
	r, err := c.cs.CallTool(cctx, &sdk.CallToolParams{Name: t.def.remote, Arguments: args})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.s.drop(c)
		return fail(OutcomeUnavailable, "tools.err.cancelled")
	case errors.Is(context.Cause(cctx), errCallTimeout):
		// A server that did not answer in time may never: it is stopped,
		// and the next call starts it again.
		t.s.drop(c)
		return fail(OutcomeTimeout, "tools.mcp.err.timeout", "timeout", t.srv.cfg.CallTimeout.String())
	case isWire(err) && c.alive():
		// The server answered the call with an error: the connection is
		// fine.
		var we *jsonrpc.Error
		errors.As(err, &we)
		return fail(OutcomeProtocol, "tools.mcp.err.protocol", "err", we.Message)
	case !c.alive() || errors.Is(err, sdk.ErrConnectionClosed) || isTransport(err):
		t.s.drop(c)
		return fail(OutcomeUnavailable, "tools.mcp.err.stopped", "err", c.explain(err).Error())
	default:
		return fail(OutcomeProtocol, "tools.mcp.err.protocol", "err", err.Error())
	}
	return t.result(env, r)
}

// isWire reports an error the server answered with.
func isWire(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we)
}

// isTransport reports an error of the connection rather than of the call.
func isTransport(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "EOF") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "closed")
}

// result renders a call's result: its text parts joined and fitted to the
// budget (the whole kept under logs/mcp/ when cut), its images as image
// parts, the rest as short notes; isError makes it a tool error.
func (t *Tool) result(env *tools.Env, r *sdk.CallToolResult) (tools.Result, string, int) {
	tx := env.Texts
	red := t.srv.redact
	var b strings.Builder
	var images []tools.Image
	size := 0
	line := func(s string) {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	for _, c := range r.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			size += len(c.Text)
			line(c.Text)
		case *sdk.ImageContent:
			size += len(c.Data)
			switch {
			case !imageMIME(c.MIMEType):
				line(tx.Fill("tools.mcp.image_dropped", "mime", c.MIMEType, "size", strconv.Itoa(len(c.Data)), "why", tx.Text("tools.mcp.image_kind")))
			case len(c.Data) > tools.MaxImageBytes:
				line(tx.Fill("tools.mcp.image_dropped", "mime", c.MIMEType, "size", strconv.Itoa(len(c.Data)), "why", tx.Fill("tools.mcp.image_size", "mb", strconv.Itoa(tools.MaxImageBytes>>20))))
			case http.DetectContentType(c.Data) != c.MIMEType && c.MIMEType != "image/webp":
				line(tx.Fill("tools.mcp.image_dropped", "mime", c.MIMEType, "size", strconv.Itoa(len(c.Data)), "why", tx.Text("tools.mcp.image_kind")))
			default:
				images = append(images, tools.Image{MIME: c.MIMEType, Data: c.Data})
			}
		case *sdk.AudioContent:
			size += len(c.Data)
			line(tx.Fill("tools.mcp.audio_dropped", "mime", c.MIMEType, "size", strconv.Itoa(len(c.Data))))
		case *sdk.ResourceLink:
			line(tx.Fill("tools.mcp.resource", "uri", c.URI, "name", c.Name))
		case *sdk.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			line(tx.Fill("tools.mcp.resource", "uri", c.Resource.URI, "name", c.Resource.MIMEType))
			if c.Resource.Text != "" {
				size += len(c.Resource.Text)
				line(c.Resource.Text)
			}
		}
	}
	if b.Len() == 0 && r.StructuredContent != nil {
		if data, err := json.Marshal(r.StructuredContent); err == nil {
			size += len(data)
			b.Write(data)
		}
	}
	text := red.redact(b.String())
	if strings.TrimSpace(text) == "" && len(images) == 0 {
		text = tx.Text("tools.mcp.no_content")
	}
	outcome := OutcomeOK
	if r.IsError {
		outcome = OutcomeToolError
	}
	return tools.Result{Text: tools.FitResult(env, "mcp", text), Images: images, IsError: r.IsError}, outcome, size
}

// imageMIME reports the image types the model is sent, as ReadImage's.
func imageMIME(m string) bool {
	switch m {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}
