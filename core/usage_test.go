package core

import (
	"testing"
	"time"
)

func TestParseContinue(t *testing.T) {
	for _, tc := range []struct {
		in          string
		amount      float64
		given, okay bool
	}{
		{"continue", 0, false, true},
		{"  Continue  ", 0, false, true},
		{"continue 5", 5, true, true},
		{"continue $2.50", 2.5, true, true},
		{"continue abc", 0, false, false},
		{"continue -1", 0, false, false},
		{"continue 0", 0, false, false},
		{"continue NaN", 0, false, false},
		{"continue 5 please", 0, false, false},
		{"go on", 0, false, false},
		{"", 0, false, false},
	} {
		a, g, ok := ParseContinue(tc.in)
		if a != tc.amount || g != tc.given || ok != tc.okay {
			t.Errorf("ParseContinue(%q) = %v, %v, %v; want %v, %v, %v", tc.in, a, g, ok, tc.amount, tc.given, tc.okay)
		}
	}
	if !IsContinue("continue abc") || IsContinue("please continue") {
		t.Errorf("IsContinue: a continue is one that starts with the word")
	}
}

func TestUsagePeriodAndReport(t *testing.T) {
	now := time.Date(2026, 3, 10, 1, 0, 0, 0, time.FixedZone("JST", 9*3600)) // 2026-03-09 in UTC
	for _, tc := range []struct{ name, from, to string }{
		{"today", "2026-03-09", "2026-03-09"},
		{"week", "2026-03-03", "2026-03-09"},
		{"month", "2026-02-08", "2026-03-09"},
		{"all", "", ""},
	} {
		from, to, ok := UsagePeriod(tc.name, now)
		if !ok || from != tc.from || to != tc.to {
			t.Errorf("UsagePeriod(%s) = %s, %s, %v; want %s, %s", tc.name, from, to, ok, tc.from, tc.to)
		}
	}
	if _, _, ok := UsagePeriod("year", now); ok {
		t.Errorf("UsagePeriod(year) accepted")
	}
	r := ReportUsage([]Usage{
		{TaskID: 1, Channel: "slack:C1", Requester: "slack:U1", Model: "a", Day: "d1", PromptTokens: 10, CompletionTokens: 1, Cost: 1},
		{TaskID: 2, Channel: "slack:C1", Requester: "slack:U2", Model: "b", Day: "d1", PromptTokens: 20, Cost: 2},
		{TaskID: 1, Channel: "slack:C2", Requester: "slack:U1", Model: "a", Day: "d2", CompletionTokens: 5, Cost: 4},
	})
	if r.Total.Requests != 3 || r.Total.Tokens() != 36 || r.Total.Cost != 7 {
		t.Errorf("total = %+v", r.Total)
	}
	if r.ByChannel["slack:C1"].Cost != 3 || r.ByRequester["slack:U1"].Cost != 5 || r.ByModel["b"].Requests != 1 || r.ByDay["d2"].Cost != 4 || r.ByTask["1"].Cost != 5 {
		t.Errorf("groups = %+v", r)
	}
}
