package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/baton-bot/baton/core/llmtest"
	"github.com/baton-bot/baton/core/tokens"
)

// TestDoctorLocalServers: baton doctor names the fix for local servers
// started without what Baton needs, by the error texts they really send:
// vLLM without a tool parser, llama.cpp's server without --jinja, and an
// Ollama that cuts prompts to its num_ctx.
func TestDoctorLocalServers(t *testing.T) {
	t.Run("vLLM without a tool parser", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m"}))
		// vLLM's 400 to any request with tools (serving_chat.py).
		srv.Handle(func(req llmtest.Request) llmtest.Step {
			if len(req.Tools) > 0 {
				return llmtest.Status(http.StatusBadRequest).WithBody(`{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`)
			}
			return llmtest.Text("OK")
		})
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.tools", "vLLM", "without a tool parser", "--enable-auto-tool-choice --tool-call-parser", "hermes")
	})
	t.Run("llama.cpp without --jinja", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m"}))
		// llama-server's answer to tools without --jinja (utils.hpp).
		srv.Handle(func(req llmtest.Request) llmtest.Step {
			if len(req.Tools) > 0 {
				return llmtest.Status(http.StatusInternalServerError).WithBody(`{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`)
			}
			return llmtest.Text("OK")
		})
		code, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.tools", "llama.cpp", "without --jinja", "start llama-server with --jinja")
	})
	// fakeOllama counts prompts as Ollama would, cut to options.num_ctx
	// when the request sends it (honour), else to 2,048.
	fakeOllama := func(honour bool) llmtest.Handler {
		counter := tokens.Default()
		return func(req llmtest.Request) llmtest.Step {
			if len(req.Tools) > 0 {
				return llmtest.Call(req.Tools[0].Name, `{"ok":true}`)
			}
			numCtx := 2048
			var body struct {
				Options struct {
					NumCtx int `json:"num_ctx"`
				} `json:"options"`
			}
			if err := json.Unmarshal(req.Raw, &body); err == nil && body.Options.NumCtx > 0 && honour {
				numCtx = body.Options.NumCtx
			}
			n := 0
			for _, m := range req.Messages {
				n += counter.Count(m.Text())
			}
			return llmtest.Text("OK").WithUsage(min(n, numCtx), 1)
		}
	}
	t.Run("Ollama cutting prompts", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m"}))
		srv.Handle(fakeOllama(false))
		code, out := doctorRun(t, "llm:\n  provider: ollama\n  context_window: 32768\n", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		if code != 1 {
			t.Errorf("exit %d", code)
		}
		wantLine(t, out, "✗", "llm.num_ctx", "counted 2048 prompt tokens", "num_ctx", "OLLAMA_CONTEXT_LENGTH=32768", "PARAMETER num_ctx 32768")
	})
	t.Run("Ollama honouring num_ctx", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m"}))
		srv.Handle(fakeOllama(true))
		_, out := doctorRun(t, "llm:\n  provider: ollama\n  context_window: 32768\n", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		wantLine(t, out, "✓", "llm.num_ctx", "arrived whole")
	})
	t.Run("Ollama found by its model list", func(t *testing.T) {
		// llm.provider auto, on a port that is not Ollama's: the model
		// list says Ollama, so its checks run and num_ctx is sent.
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m:latest", OwnedBy: "library"}))
		srv.Handle(fakeOllama(true))
		_, out := doctorRun(t, "llm:\n  context_window: 32768\n", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		wantLine(t, out, "✓", "llm.provider", "Ollama", "from the endpoint's model list")
		wantLine(t, out, "✓", "llm.num_ctx", "arrived whole")
	})
	t.Run("not checked elsewhere", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.WithModels(llmtest.Model{ID: "m"}))
		srv.Handle(fakeOllama(false))
		_, out := doctorRun(t, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "BATON_LLM_MODEL": "m"})
		wantLine(t, out, "✓", "llm.provider", "none Baton knows", "set llm.provider")
		if line := checkLine(out, "llm.num_ctx"); line != "" {
			t.Errorf("the truncation check ran for an endpoint not known as Ollama: %s", line)
		}
	})
}
