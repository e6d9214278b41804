package dailyquiz_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/fakesens"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
)

// TestDailyQuizAlimtalk is issue 19's acceptance: the example's daily quiz,
// its channel switched to the Kakao plugin in `mode: alimtalk` (the real
// plugin process), sends to 10,000 opted-in users through a fake SENS
// partner: requests of the partner's maximum size (100), each user's quiz
// delivered, the users Kakao cannot reach (not a KakaoTalk user, blocked the
// channel) dead-lettered one by one with Kakao's reason, and the ones Kakao
// failed transiently retried and delivered.
func TestDailyQuizAlimtalk(t *testing.T) {
	t.Parallel()
	const users = 10_000
	db := appDB(t, fmt.Sprintf(`
		INSERT INTO users (name, phone, opted_in)
		  SELECT 'user' || i, '010-' || lpad((i / 10000)::text, 4, '0') || '-' || lpad((i %% 10000)::text, 4, '0'), true
		  FROM generate_series(1, %d) AS i;
		INSERT INTO quizzes (day, question, choices)
		  VALUES ((now() AT TIME ZONE 'Asia/Seoul')::date, 'Which planet is largest?', ARRAY['Mars', 'Jupiter', 'Venus'])`, users))
	rds := testenv.NewRedis(t)
	ctx := testenv.Context(t)
	number := func(i int) string { return fmt.Sprintf("010%04d%04d", i/10000, i%10000) }

	partner, err := fakesens.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = partner.Close() })
	partner.Templates["daily_quiz"] = "Good morning, #{name}! Today's quiz: #{question}"
	unreachable := map[string]string{} // number → the reason Kakao gives
	for i := 100; i <= users; i += 1000 {
		partner.Undeliverable[number(i)] = "3019"
		unreachable[number(i)] = "not a KakaoTalk user"
		partner.Undeliverable[number(i+1)] = "3020"
		unreachable[number(i+1)] = "blocked AlimTalk"
		partner.Flaky[number(i+2)] = true
	}

	dir := t.TempDir()
	testenv.InstallPlugin(t, dir, "kakao", "github.com/notifyd/notifyd/plugins/kakao")
	cfg := exampleConfig(t, db, rds, "NOTIFYD_PLUGINS_DIR="+dir)
	// The switch: the quiz channel becomes an AlimTalk channel. Retries come
	// quickly here so the test need not wait the example's 5 minutes.
	quiz := cfg.Channels["quiz"]
	quiz.Plugin = "kakao"
	quiz.Config = map[string]any{
		"mode":     "alimtalk",
		"alimtalk": partner.Alimtalk("daily_quiz", "delivered"),
		"template": map[string]any{"content": "{{.text}}"},
		"timeout":  "1m", // each partner request's; the channel's is below
	}
	quiz.BatchSize, quiz.Concurrency = 1000, 10000
	// A minute for a call of 1,000, not the default 10 s: beside the whole
	// suite and two CPU burners on a slow host, two calls ran past it and
	// their 2,000 messages were sent a second time (rehearsal 63), where the
	// test counts exactly the ones Kakao failed once.
	quiz.Timeout = time.Minute
	quiz.Retry = config.Retry{MaxAttempts: 4, Base: 200 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: "none"}
	cfg.Channels["quiz"] = quiz

	c := startExample(t, cfg, notifyd.Options{})
	job, err := c.RunSchedule(ctx, "daily-quiz", client.RunRequest{})
	if err != nil {
		t.Fatal(err)
	}

	count := func() (sent, failed, other int) {
		return testenv.Statuses(ctx, t, db.Pool, "channel = $1", "quiz")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if job, err = c.Job(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		sent, failed, other := count()
		if job.State == "DONE" && other == 0 && sent+failed == users {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 min: job %s, SENT %d, FAILED %d, unfinished %d", job.State, sent, failed, other)
		}
		time.Sleep(200 * time.Millisecond)
	}

	sent, failed, _ := count()
	if sent != users-len(unreachable) || failed != len(unreachable) {
		t.Errorf("SENT %d, FAILED %d; want %d and %d (the unreachable users)", sent, failed, users-len(unreachable), len(unreachable))
	}
	// Each unreachable user's own dead letter, with Kakao's reason.
	rows, err := db.Pool.Query(ctx, `SELECT recipient, last_error, attempts FROM notifications WHERE channel = 'quiz' AND status = 'FAILED'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var rcpt, lastErr string
		var attempts int
		if err := rows.Scan(&rcpt, &lastErr, &attempts); err != nil {
			t.Fatal(err)
		}
		num := strings.ReplaceAll(rcpt, "-", "")
		if want, ok := unreachable[num]; !ok || !strings.Contains(lastErr, want) || attempts != 1 {
			t.Errorf("%s FAILED after %d attempts: %q; want only unreachable users, at once, with Kakao's reason", rcpt, attempts, lastErr)
		}
	}
	rows.Close()
	// The transient ones: retried, then delivered.
	var retried int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE channel = 'quiz' AND status = 'SENT' AND attempts = 2`).Scan(&retried); err != nil {
		t.Fatal(err)
	}
	if retried != users/1000 {
		t.Errorf("%d notifications SENT on their second attempt; want the %d Kakao failed once", retried, users/1000)
	}
	delivered := partner.Delivered()
	for i := 1; i <= users; i++ {
		if _, bad := unreachable[number(i)]; !bad && delivered[number(i)] == 0 {
			t.Errorf("user %d (%s) never got the quiz", i, number(i))
		}
	}
	// Requests of the partner's maximum size: never over 100, and full
	// ones wherever the host batch had 100 to give (a claim takes what is
	// ready, so a batch can come up short while the schedule is still
	// writing the run).
	full, small, messages := 0, 0, 0
	for _, n := range partner.Sizes() {
		messages += n
		switch {
		case n > fakesens.MaxMessages:
			t.Errorf("a request of %d messages", n)
		case n == fakesens.MaxMessages:
			full++
		default:
			small++
		}
	}
	if requests := full + small; requests == 0 || messages/requests < fakesens.MaxMessages/2 || full < small {
		t.Errorf("%d full requests and %d smaller ones for %d messages; want most at the partner's maximum", full, small, messages)
	}
	t.Logf("%d SENT, %d FAILED, %d retried; %d requests of 100, %d smaller", sent, failed, retried, full, small)
}
