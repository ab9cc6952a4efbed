package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-bot/baton/adapters/api"
	"github.com/baton-bot/baton/core"
)

func TestPoster(t *testing.T) {
	ctx := context.Background()
	var p api.Poster
	th := core.ThreadRef{Platform: core.PlatformAPI, Channel: "api", Thread: "x"}
	a, err := p.Post(ctx, th, "hello")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Upload(ctx, th, "f.txt", strings.NewReader("data"), 4, "a file")
	if err != nil {
		t.Fatal(err)
	}
	if a == "" || b == "" || a == b {
		t.Errorf("message ids %q and %q, want two distinct ids", a, b)
	}
	if err := p.Update(ctx, th, a, "edited"); err != nil {
		t.Error(err)
	}
	if err := p.React(ctx, th, a, "eyes", false); err != nil {
		t.Error(err)
	}
	if l := p.Limits(); l.Post < 100_000 || l.MaxParts < 4 || l.Every != 0 {
		t.Errorf("limits = %+v, want generous ones", l)
	}
}
