package engine

import (
	"context"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/tools"
)

// movementSpan starts the span of movement name; with tracing off it
// builds nothing.
func (pr *pieceRun) movementSpan(ctx context.Context, name string) (context.Context, core.Span) {
	if pr.e.cfg.Tracer == nil {
		return core.StartSpan(ctx, nil, "")
	}
	return pr.e.cfg.Tracer.Start(ctx, "movement", core.Attr{Key: "baton.movement", Value: name})
}

// complete sends req to the model under a span of its own (the model, its
// token counts and attrs; never the messages).
func (m *movement) complete(ctx context.Context, req llm.Request, attrs ...core.Attr) (llm.Response, error) {
	if m.pr.e.cfg.Tracer == nil {
		return m.pr.e.model.Complete(ctx, req)
	}
	ctx, span := core.StartSpan(ctx, m.pr.e.cfg.Tracer, "model.request", append([]core.Attr{
		{Key: "gen_ai.request.model", Value: req.Model}, {Key: "baton.iteration", Value: m.iter}}, attrs...)...)
	defer span.End()
	resp, err := m.pr.e.model.Complete(ctx, req)
	span.Fail(err)
	if err == nil {
		span.SetAttributes(core.Attr{Key: "gen_ai.usage.input_tokens", Value: resp.Usage.PromptTokens},
			core.Attr{Key: "gen_ai.usage.output_tokens", Value: resp.Usage.CompletionTokens},
			core.Attr{Key: "baton.tool_calls", Value: len(resp.Message.ToolCalls)})
	}
	return resp, err
}

// tracedCall is callTool under a span of its own (the tool's name and
// whether it failed; never its arguments or result, which may hold
// secrets).
func (m *movement) tracedCall(ctx context.Context, call llm.ToolCall) (tools.Result, bool, error) {
	if m.pr.e.cfg.Tracer == nil {
		return m.callTool(ctx, call)
	}
	ctx, span := core.StartSpan(ctx, m.pr.e.cfg.Tracer, "tool.call", core.Attr{Key: "baton.tool", Value: call.Name})
	defer span.End()
	res, valid, err := m.callTool(ctx, call)
	span.Fail(err)
	span.SetAttributes(core.Attr{Key: "baton.tool.is_error", Value: res.IsError})
	return res, valid, err
}
