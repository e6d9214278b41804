package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

// The daily path under faults (Setup.Daily): a schedule over a topic of
// Daily subscribers fires every DailyEvery while the load and the faults
// run, and a campaign goes to the same topic through the API as an operator
// would send one. check then wants every subscriber to have each fire
// time's notification (and the campaign's) delivered at least once, no fire
// time missed or run twice, and counts the duplicates.

const (
	dailySchedule = "daily"
	dailyTopic    = "daily"
)

// DailyReport is the daily path's figures.
type DailyReport struct {
	Subscribers int
	Every       time.Duration
	FireTimes   int // fire times the run covered (first run to healing)
	Missed      int // fire times in that span without a run
	Doubled     int // fire times with more than one run
	Delivered   int // subscriber × fire time notifications delivered at least once
	Undelivered int // … not (each is also a problem)
	// Failed: the untitled subscribers' notifications, FAILED with the
	// reason as they should be (Setup.DailyUntitledEvery).
	Failed     int
	Duplicates int // deliveries the sink accepted beyond the first
	// The campaign to the same topic: its job's state and members delivered.
	CampaignState     string
	CampaignDelivered int
}

// dailyConfig is the schedules and jobs part of an instance's config.
func (c *Cluster) dailyConfig() string {
	if c.Setup.Daily == 0 {
		return ""
	}
	cron := "@every " + c.Setup.DailyEvery.String()
	if c.Setup.DailyEvery == time.Minute {
		cron = "* * * * *"
	}
	return fmt.Sprintf(`jobs: {heartbeat: 1s, stuck_after: 6s}
schedules:
  %s:
    channel: %s
    cron: %q
    timezone: UTC
    lead: 10s
    max_late: 10m
    chunk_size: 1000
    audience: {topic: %s}
    payload: {daily: "{{.fire_time.Unix}}", to: "{{.recipient}}", title: "{{.data.title}}"}
`, dailySchedule, Channel, cron, dailyTopic)
}

// seedDaily writes the topic's subscribers, before any instance starts:
// each with a title attribute the payload template needs, but every
// DailyUntitledEvery-th.
func (c *Cluster) seedDaily(ctx context.Context) error {
	if _, err := c.DB.Exec(ctx, `
		INSERT INTO subscribers (external_id, addresses, attributes)
		SELECT 'daily-' || i, jsonb_build_object($2::text, 'daily-' || i),
		       CASE WHEN $3 > 0 AND i % $3 = 0 THEN '{}'::jsonb ELSE '{"title": "today''s quiz"}'::jsonb END
		FROM generate_series(1, $1::int) i`, c.Setup.Daily, Channel, c.Setup.DailyUntitledEvery); err != nil {
		return fmt.Errorf("chaos: seed the daily topic: %w", err)
	}
	if _, err := c.DB.Exec(ctx, `
		INSERT INTO topic_subscriptions (topic, subscriber_id)
		SELECT $1, id FROM subscribers WHERE starts_with(external_id, 'daily-')`, dailyTopic); err != nil {
		return fmt.Errorf("chaos: seed the daily topic: %w", err)
	}
	return nil
}

// untitled reports whether subscriber i was seeded without the title.
func (c *Cluster) untitled(i int) bool {
	return c.Setup.DailyUntitledEvery > 0 && i%c.Setup.DailyUntitledEvery == 0
}

// sendCampaign creates a campaign to the daily topic through the API of a
// running instance, retrying while faults make instances unreachable.
func (c *Cluster) sendCampaign(ctx context.Context) (int64, error) {
	var last error
	for attempt := 0; attempt < 60 && ctx.Err() == nil; attempt++ {
		running := c.Running()
		if len(running) > 0 {
			cl, err := client.New("http://"+running[attempt%len(running)], Token, client.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
			if err != nil {
				return 0, err
			}
			j, err := cl.CreateCampaign(ctx, client.Campaign{Channel: Channel, Audience: client.Audience{Topic: dailyTopic},
				Payload: map[string]any{"campaign": "{{.recipient}}"}})
			if err == nil {
				return j.ID, nil
			}
			last = err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return 0, fmt.Errorf("chaos: create the campaign: %v", last)
}

// settleDaily, once everything is healed, waits for every run with a fire
// time up to healed (and the campaign) to finish materialising, then empties
// the topic, so later fire times add nothing while the suite waits for the
// pipeline to finish. within bounds a stall, not the wait
// (testenv.Progress): it fails once the runs' materialised count has not
// moved for within, or after three times within in all. A loaded CI machine
// materialises many times slower than a quiet one; runs that stop moving are
// the fault. (The wait for the last notification after healing, waitQuiet,
// keeps its fixed allowance on purpose: a row stranded until the sweeper
// must show there.)
func (c *Cluster) settleDaily(ctx context.Context, healed time.Time, campaign int64, within time.Duration) error {
	var st testenv.Progress
	for {
		var open, done int64
		err := c.DB.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE state IN ('PENDING', 'RUNNING')), coalesce(sum(done + skipped), 0) FROM jobs
			WHERE (schedule = $1 AND fire_time <= $2) OR id = $3`,
			dailySchedule, healed, campaign).Scan(&open, &done)
		if err == nil && open == 0 {
			break
		}
		if err == nil {
			st.Observe(done - open)
		}
		if st.Stalled(within, 3) {
			return fmt.Errorf("chaos: daily runs still materialising after healing (%d open, %s; %v)", open, &st, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if _, err := c.DB.Exec(ctx, `DELETE FROM topic_subscriptions WHERE topic = $1`, dailyTopic); err != nil {
		return fmt.Errorf("chaos: empty the daily topic: %w", err)
	}
	return nil
}

// checkDaily fills r.Daily: the runs with a fire time up to healed and the
// campaign, against the sink.
func (c *Cluster) checkDaily(ctx context.Context, r *Report, healed time.Time, campaign int64) error {
	d := &DailyReport{Subscribers: c.Setup.Daily, Every: c.Setup.DailyEvery}
	r.Daily = d
	rows, err := c.DB.Query(ctx, `
		SELECT fire_time, count(*), min(state), min(done), max(done) FROM jobs
		WHERE schedule = $1 AND fire_time <= $2 AND rerun = 0 GROUP BY fire_time ORDER BY fire_time`, dailySchedule, healed)
	if err != nil {
		return fmt.Errorf("chaos: read the daily runs: %w", err)
	}
	var fires []time.Time
	for rows.Next() {
		var (
			f          time.Time
			n          int
			state      string
			minD, maxD int64
		)
		if err := rows.Scan(&f, &n, &state, &minD, &maxD); err != nil {
			rows.Close()
			return err
		}
		fires = append(fires, f)
		if n > 1 {
			d.Doubled++
			r.problem("daily fire time %s has %d runs, want one", f.Format(time.RFC3339), n)
		}
		if state != "DONE" || minD != int64(d.Subscribers) {
			r.problem("daily run at %s is %s with %d of %d materialised", f.Format(time.RFC3339), state, minD, d.Subscribers)
		}
	}
	rows.Close()
	if len(fires) == 0 {
		r.problem("no daily run fired before healing")
		return nil
	}
	d.FireTimes = len(fires)
	for i := 1; i < len(fires); i++ {
		if gap := fires[i].Sub(fires[i-1]); gap > d.Every {
			missed := int(gap/d.Every) - 1
			d.Missed += missed
			r.problem("daily fire times %s … %s: %d missed in between", fires[i-1].Format(time.RFC3339), fires[i].Format(time.RFC3339), missed)
		}
	}
	seen := c.Sink.Snapshot()
	check := func(key string) bool {
		s := seen[key]
		if s.Accepted == 0 {
			return false
		}
		d.Duplicates += s.Accepted - 1
		r.duplicated(s)
		return true
	}
	failed := map[string]string{} // key → last error, for the FAILED daily rows
	frows, err := c.DB.Query(ctx, `SELECT idempotency_key, coalesce(last_error, '') FROM notifications
		WHERE status = 'FAILED' AND starts_with(idempotency_key, 'schedule:' || $1 || ':')`, dailySchedule)
	if err != nil {
		return fmt.Errorf("chaos: read the daily dead letters: %w", err)
	}
	for frows.Next() {
		var k, e string
		if err := frows.Scan(&k, &e); err != nil {
			frows.Close()
			return err
		}
		failed[k] = e
	}
	frows.Close()
	for _, f := range fires {
		prefix := "schedule:" + dailySchedule + ":" + f.UTC().Format(time.RFC3339) + ":"
		for i := 1; i <= d.Subscribers; i++ {
			key := fmt.Sprintf("%sdaily-%d", prefix, i)
			if c.untitled(i) {
				if e, ok := failed[key]; ok && strings.Contains(e, "title") {
					d.Failed++
				} else {
					r.problem("daily: %s (no title) is not FAILED with a reason naming the title (%q)", key, e)
				}
				if seen[key].Accepted > 0 {
					r.problem("daily: %s (no title) was delivered", key)
				}
				continue
			}
			if check(key) {
				d.Delivered++
				continue
			}
			d.Undelivered++
			if d.Undelivered <= 5 {
				r.problem("daily: %s never delivered", key)
			}
		}
	}
	if d.Undelivered > 5 {
		r.problem("daily: %d subscriber × fire time notifications never delivered in all", d.Undelivered)
	}
	if err := c.DB.QueryRow(ctx, `SELECT state FROM jobs WHERE id = $1`, campaign).Scan(&d.CampaignState); err != nil {
		return fmt.Errorf("chaos: read the campaign: %w", err)
	}
	if d.CampaignState != "DONE" {
		r.problem("the campaign to the daily topic is %s, want DONE", d.CampaignState)
	}
	for i := 1; i <= d.Subscribers; i++ {
		if check(fmt.Sprintf("campaign:%d:daily-%d", campaign, i)) {
			d.CampaignDelivered++
		}
	}
	if d.CampaignDelivered != d.Subscribers {
		r.problem("the campaign reached %d of %d subscribers", d.CampaignDelivered, d.Subscribers)
	}
	return nil
}

// dailyString is the report's daily section.
func (d *DailyReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  daily path     schedule every %v over %d subscribers: %d fire times, %d missed, %d run twice;\n",
		d.Every, d.Subscribers, d.FireTimes, d.Missed, d.Doubled)
	fmt.Fprintf(&b, "                 %d of %d subscriber × fire time notifications delivered, %d FAILED for a missing title (as they should), %d duplicates;\n",
		d.Delivered, d.Delivered+d.Undelivered, d.Failed, d.Duplicates)
	fmt.Fprintf(&b, "                 campaign to the topic %s, %d of %d delivered\n", d.CampaignState, d.CampaignDelivered, d.Subscribers)
	return b.String()
}
