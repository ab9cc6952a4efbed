package llm

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", map[string]string{"Retry-After": "12"}, 12 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "soon", "Retry-After": "9"}, 9 * time.Second},
		{"garbage", map[string]string{"Retry-After": "whenever"}, 0},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"capped", map[string]string{"Retry-After": "100000"}, retryAfterMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if tt.header == nil {
				h = nil
			}
			if got := retryAfter(h, now); got != tt.want {
				t.Errorf("retryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	for n := range 100 {
		nominal := backoffMax
		if n < 16 {
			nominal = min(backoffBase<<n, backoffMax)
		}
		for range 20 {
			if d := backoff(n); d < nominal/2 || d > nominal {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, nominal/2, nominal)
			}
		}
	}
}

func TestRateLimitText(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM).", true},
		{"You exceeded your current quota, please check your plan and billing details.", true},
		{`{"error":{"code":"rate_limit_exceeded"}}`, true},
		{"Error 429: Too Many Requests", true},
		{"Resource has been exhausted (e.g. check quota).", true},
		{"レート制限に達しました。", true},
		{"APIの利用上限に達しました", true},
		{"", false},
		{"Done: the report is in output/report.md.", false},
		{"The function now handles rate limits gracefully.", false},
		{"Rate limit reached. " + string(make([]byte, 500)), false},
	}
	for _, tt := range tests {
		if got := rateLimitText(tt.text); got != tt.want {
			t.Errorf("rateLimitText(%.40q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	if got := clip("héllo", 2); got != "h…" {
		t.Errorf("clip = %q, want %q", got, "h…")
	}
	if got := clip("abc", 5); got != "abc" {
		t.Errorf("clip = %q", got)
	}
}
