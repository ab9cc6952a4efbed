package chat

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-bot/baton/core"
)

// topTasks is how many tasks `/baton usage` names.
const topTasks = 5

// usage answers `/baton usage [today|week|month]` (today by default): the
// spend of the channel and of the caller in the period, and the channel's
// most expensive tasks.
func (s *Service) usage(ctx context.Context, c Command) (Reply, error) {
	period := strings.ToLower(strings.TrimSpace(c.Args))
	if period == "" {
		period = "today"
	}
	from, to, ok := core.UsagePeriod(period, s.cfg.Now())
	if !ok || period == "all" {
		return Reply{Text: s.say("usage_bad_period", "period", c.Args)}, nil
	}
	rows, err := s.store.Usage(ctx, core.UsageFilter{Channel: c.Channel, FromDay: from, ToDay: to})
	if err != nil {
		return Reply{}, err
	}
	mine, err := s.store.SumUsage(ctx, core.UsageFilter{Requester: c.Author.ID, FromDay: from, ToDay: to})
	if err != nil {
		return Reply{}, err
	}
	r := core.ReportUsage(rows)
	lines := []string{
		s.say("usage_header", "period", period, "from", from, "to", to),
		s.say("usage_channel", "line", s.usageLine(r.Total)),
		s.say("usage_you", "line", s.usageLine(mine)),
	}
	type task struct {
		id  string
		sum core.UsageSum
	}
	var tasks []task
	for id, sum := range r.ByTask {
		tasks = append(tasks, task{id, sum})
	}
	slices.SortFunc(tasks, func(a, b task) int {
		return cmp.Or(cmp.Compare(b.sum.Cost, a.sum.Cost), cmp.Compare(b.sum.Tokens(), a.sum.Tokens()), strings.Compare(a.id, b.id))
	})
	if len(tasks) > 0 {
		lines = append(lines, s.say("usage_top"))
		for _, t := range tasks[:min(topTasks, len(tasks))] {
			lines = append(lines, "  #"+t.id+" "+s.usageLine(t.sum))
		}
	}
	return Reply{Text: strings.Join(lines, "\n")}, nil
}

// usageLine is one sum as people read it.
func (s *Service) usageLine(u core.UsageSum) string {
	return s.say("usage_line", "cost", "$"+strconv.FormatFloat(u.Cost, 'f', 2, 64), "requests", strconv.FormatInt(u.Requests, 10),
		"tokens", strconv.FormatInt(u.Tokens(), 10))
}
