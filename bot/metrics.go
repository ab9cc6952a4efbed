package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-bot/baton/core"
	"github.com/baton-bot/baton/core/engine"
	"github.com/baton-bot/baton/core/llm"
	"github.com/baton-bot/baton/core/mcp"
	"github.com/baton-bot/baton/core/worker"
)

// metrics is Baton's Prometheus registry. Names start with baton_; labels
// are bounded (states, models, tools, platforms — never task or job ids).
type metrics struct {
	reg *prometheus.Registry

	llmLatency   *prometheus.HistogramVec
	llmTokens    *prometheus.CounterVec
	llmErrors    *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	toolErrors   *prometheus.CounterVec
	toolLatency  *prometheus.HistogramVec
	levels       *prometheus.CounterVec
	movements    *prometheus.HistogramVec
	claimLatency prometheus.Histogram
	jobDurations *prometheus.HistogramVec

	tokenError  *prometheus.HistogramVec
	tokenFactor *prometheus.GaugeVec

	mcpCalls   *prometheus.CounterVec
	mcpLatency *prometheus.HistogramVec

	textCalls *prometheus.CounterVec // tool calls written as text
}

var (
	_ engine.Meter         = (*metrics)(nil)
	_ engine.TextCallMeter = (*metrics)(nil)
	_ mcp.Meter            = (*metrics)(nil)
	_ worker.PoolMeter     = (*metrics)(nil)
	_ worker.ExecutorMeter = (*metrics)(nil)
)

// gauges reads figures at scrape time.
type gauges struct {
	store interface {
		CountJobs(ctx context.Context) (map[core.JobState]int64, error)
		OutboxStats(ctx context.Context) (map[core.Platform]core.OutboxStats, error)
	}
	queue interface {
		Stats(ctx context.Context) (core.QueueStats, error)
	}
	lastEvent map[string]func() time.Time // adapter name → its last event
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.llmLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_llm_request_seconds", Help: "Latency of LLM completions, retries included.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 10)}, []string{"model"})
	m.llmTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_llm_tokens_total", Help: "Tokens the LLM reported, by kind (prompt, completion, cached)."}, []string{"model", "kind"})
	m.llmErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_llm_errors_total", Help: "LLM completions that failed after their retries."}, []string{"model"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_tool_calls_total", Help: "Tool calls by tool."}, []string{"tool"})
	m.toolErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_tool_errors_total", Help: "Tool calls that returned an error, by tool."}, []string{"tool"})
	m.toolLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_tool_seconds", Help: "Tool run time by tool.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"tool"})
	m.levels = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_context_levels_total", Help: "Context manager steps taken in movements: ladder levels (warn, prompt, force_transition, exhausted) and masked, compacted."}, []string{"level"})
	m.movements = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_movement_seconds", Help: "Movement durations by piece and movement.", Buckets: prometheus.ExponentialBuckets(0.5, 2, 12)}, []string{"piece", "movement"})
	m.claimLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_claim_seconds", Help: "Time jobs waited for a worker: from being queued in the store (created, resumed or requeued; retry backoff included) to being claimed.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	m.jobDurations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_job_run_seconds", Help: "Job runs by how their lease was settled (ack, nack, park, requeue, drop).", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"action"})
	m.tokenError = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_token_estimate_ratio", Help: "Prompt tokens the LLM reported divided by the offline tokenizer's count of the same request, by model (1 is exact).", Buckets: []float64{0.5, 0.7, 0.8, 0.9, 0.95, 1, 1.05, 1.1, 1.2, 1.3, 1.5, 2}}, []string{"model"})
	m.tokenFactor = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_token_correction_factor", Help: "Correction factor applied to the offline tokenizer's counts, learned per model."}, []string{"model"})
	m.mcpCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_mcp_calls_total", Help: "MCP tool calls by server and outcome (ok, tool_error, protocol_error, timeout, unavailable)."}, []string{"server", "outcome"})
	m.mcpLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "baton_mcp_call_seconds", Help: "MCP tool call time by server.", Buckets: prometheus.ExponentialBuckets(0.005, 4, 9)}, []string{"server"})
	m.reg.MustRegister(m.tokenError, m.tokenFactor, m.mcpCalls, m.mcpLatency)
	m.textCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_llm_text_tool_calls_total", Help: "Tool calls the model wrote as text instead of tool_calls, by outcome (recovered: read as calls; repaired: arguments that were not valid JSON, repaired; unreadable: the model was told the format)."}, []string{"model", "outcome"})
	m.reg.MustRegister(m.textCalls)
	m.reg.MustRegister(m.llmLatency, m.llmTokens, m.llmErrors, m.toolCalls, m.toolErrors, m.toolLatency, m.levels, m.movements,
		m.claimLatency, m.jobDurations, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watch registers the scrape-time figures of g.
func (m *metrics) watch(g gauges) {
	m.reg.MustRegister(&gaugeCollector{g: g,
		jobs:          prometheus.NewDesc("baton_jobs", "Jobs by state.", []string{"state"}, nil),
		depth:         prometheus.NewDesc("baton_queue_jobs", "Jobs in the queue by position (pending, active, retry, dead, parked).", []string{"position"}, nil),
		up:            prometheus.NewDesc("baton_queue_up", "1 when the queue answers.", nil, nil),
		lastEvent:     prometheus.NewDesc("baton_adapter_last_event_age_seconds", "Seconds since an adapter's last event.", []string{"adapter"}, nil),
		outboxPending: prometheus.NewDesc("baton_outbox_pending", "Messages waiting for delivery, by platform.", []string{"platform"}, nil),
		outboxFailed:  prometheus.NewDesc("baton_outbox_failed", "Messages given up on, by platform.", []string{"platform"}, nil),
		outboxLag:     prometheus.NewDesc("baton_outbox_lag_seconds", "Age of the oldest message waiting for delivery, by platform.", []string{"platform"}, nil),
	})
}

// watchDiscord registers baton_discord_connection_held, read from held.
func (m *metrics) watchDiscord(held func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "baton_discord_connection_held",
		Help: "1 while this process holds the Discord lease and with it the gateway connection; 0 on standby.",
	}, func() float64 {
		if held() {
			return 1
		}
		return 0
	}))
}

func (m *metrics) LLMCall(model string, took time.Duration, u llm.Usage, err error) {
	m.llmLatency.WithLabelValues(model).Observe(took.Seconds())
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			m.llmErrors.WithLabelValues(model).Inc()
		}
		return
	}
	m.llmTokens.WithLabelValues(model, "prompt").Add(float64(u.PromptTokens))
	m.llmTokens.WithLabelValues(model, "completion").Add(float64(u.CompletionTokens))
	m.llmTokens.WithLabelValues(model, "cached").Add(float64(u.CachedTokens))
}

// TextCalls implements engine.TextCallMeter.
func (m *metrics) TextCalls(model, outcome string, n int) {
	m.textCalls.WithLabelValues(model, outcome).Add(float64(n))
}

func (m *metrics) ToolCall(tool string, took time.Duration, failed bool) {
	m.toolCalls.WithLabelValues(tool).Inc()
	m.toolLatency.WithLabelValues(tool).Observe(took.Seconds())
	if failed {
		m.toolErrors.WithLabelValues(tool).Inc()
	}
}

// MCPCall implements mcp.Meter.
func (m *metrics) MCPCall(server, outcome string, took time.Duration) {
	m.mcpCalls.WithLabelValues(server, outcome).Inc()
	m.mcpLatency.WithLabelValues(server).Observe(took.Seconds())
}

func (m *metrics) ContextLevel(level string) { m.levels.WithLabelValues(level).Inc() }

func (m *metrics) TokenEstimate(model string, estimated, reported int, factor float64) {
	if estimated > 0 {
		m.tokenError.WithLabelValues(model).Observe(float64(reported) / float64(estimated))
	}
	m.tokenFactor.WithLabelValues(model).Set(factor)
}

func (m *metrics) Movement(piece, movement string, took time.Duration) {
	m.movements.WithLabelValues(piece, movement).Observe(took.Seconds())
}

func (m *metrics) QueueWait(d time.Duration) { m.claimLatency.Observe(d.Seconds()) }

func (m *metrics) Settled(action string, took time.Duration) {
	m.jobDurations.WithLabelValues(action).Observe(took.Seconds())
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// gaugeCollector asks the store, the queue and the adapters at scrape time.
type gaugeCollector struct {
	g                                      gauges
	jobs, depth, up, lastEvent             *prometheus.Desc
	outboxPending, outboxFailed, outboxLag *prometheus.Desc
}

func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.depth
	ch <- c.up
	ch <- c.lastEvent
	ch <- c.outboxPending
	ch <- c.outboxFailed
	ch <- c.outboxLag
}

func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if counts, err := c.g.store.CountJobs(ctx); err == nil {
		for _, s := range core.JobStates {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(counts[s]), string(s))
		}
	}
	if ob, err := c.g.store.OutboxStats(ctx); err == nil {
		for p, st := range ob {
			ch <- prometheus.MustNewConstMetric(c.outboxPending, prometheus.GaugeValue, float64(st.Pending), string(p))
			ch <- prometheus.MustNewConstMetric(c.outboxFailed, prometheus.GaugeValue, float64(st.Failed), string(p))
			lag := 0.0
			if !st.OldestPending.IsZero() {
				lag = time.Since(st.OldestPending).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(c.outboxLag, prometheus.GaugeValue, lag, string(p))
		}
	}
	st, err := c.g.queue.Stats(ctx)
	up := 0.0
	if err == nil {
		up = 1
		for pos, n := range map[string]int64{"pending": st.Pending, "active": st.Active, "retry": st.Retry, "dead": st.Dead, "parked": st.Parked} {
			ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n), pos)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	for name, last := range c.g.lastEvent {
		if t := last(); !t.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lastEvent, prometheus.GaugeValue, time.Since(t).Seconds(), name)
		}
	}
}
