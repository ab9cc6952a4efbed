package llm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-bot/baton/core/llm"
	"github.com/google/go-cmp/cmp"
)

// TestBodySentWhole: the body, kept as pieces, reaches the server with its
// length declared (not chunked) and byte for byte as Encode builds it, on
// the first attempt and on a retry, plain and streamed.
func TestBodySentWhole(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			type got struct {
				length    int64
				chunked   bool
				body      string
				bodyBytes int
			}
			var mu sync.Mutex
			var seen []got
			base := endpoint(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				seen = append(seen, got{r.ContentLength, len(r.TransferEncoding) > 0, string(b), len(b)})
				first := len(seen) == 1
				mu.Unlock()
				if first {
					jsonError(http.StatusInternalServerError, "try again")(w, r)
					return
				}
				if stream {
					answer(http.StatusOK, "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")(w, r)
					return
				}
				answer(http.StatusOK, "application/json", okReply)(w, r)
			}, nil)
			p := newProbe(t, base, "", "m", nil)
			if stream {
				c, err := llm.New(llm.Config{BaseURL: base, Model: "m", MaxRetries: 3, Stream: true,
					Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
				if err != nil {
					t.Fatal(err)
				}
				p.client = c
			}
			var msgs []llm.Message
			for i := range 50 {
				msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: strings.Repeat(fmt.Sprint("part ", i, " <&> 日本 "), 40)})
			}
			req := llm.Request{Messages: msgs}
			want, err := p.client.Encode(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.client.Complete(context.Background(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			w := got{int64(want.Len()), false, string(want.Bytes()), want.Len()}
			if diff := cmp.Diff([]got{w, w}, seen, cmp.AllowUnexported(got{})); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
