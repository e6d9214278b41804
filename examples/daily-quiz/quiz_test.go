package dailyquiz_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/client"
)

// phone records what the quiz channel sends, in place of the webhook.
type phone struct {
	mu  sync.Mutex
	got map[string][]map[string]string // recipient → payloads
}

func (*phone) Describe() sdk.Info { return sdk.Info{Name: "phone", Version: "1"} }

func (p *phone) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(_ context.Context, m sdk.Message) sdk.Verdict {
		var payload map[string]string
		if err := json.Unmarshal(m.Payload, &payload); err != nil {
			return sdk.Permanent(err.Error())
		}
		p.mu.Lock()
		p.got[m.Recipient] = append(p.got[m.Recipient], payload)
		p.mu.Unlock()
		return sdk.Success(nil)
	}), nil
}

// TestDailyQuiz runs the example's notifyd.yaml — its schedule, audience
// query and templates unchanged; only the services' addresses, the
// channel's plugin and the hour of the schedule's own fire (exampleConfig)
// are swapped for the test's — against the application's
// tables from schema.sql: every opted-in user gets today's quiz, the opted-out
// user nothing, the user without a name a FAILED notification saying so while
// the others go out, and running the same fire time again sends nothing.
func TestDailyQuiz(t *testing.T) {
	t.Parallel()
	db := appDB(t, `
		INSERT INTO users (name, phone, opted_in) VALUES
		  ('Minji', '010-1111-0001', true), ('Joon', '010-1111-0002', true), ('Ada', '010-1111-0003', true),
		  (NULL, '010-1111-0004', true),        -- no name: the template cannot render for them
		  ('Bora', '010-1111-0005', false);     -- not opted in
		INSERT INTO quizzes (day, question, choices) VALUES
		  ((now() AT TIME ZONE 'Asia/Seoul')::date, 'Which planet is largest?', ARRAY['Mars', 'Jupiter', 'Venus']),
		  ((now() AT TIME ZONE 'Asia/Seoul')::date - 1, 'yesterday''s question', ARRAY['a', 'b'])`)
	rds := testenv.NewRedis(t)
	ctx := testenv.Context(t)
	cfg := exampleConfig(t, db, rds)
	quiz := cfg.Channels["quiz"]
	quiz.Plugin, quiz.Config = "phone", map[string]any{}
	cfg.Channels["quiz"] = quiz
	p := &phone{got: map[string][]map[string]string{}}
	providers := providers.NewInProcess(map[string]sdk.Provider{"phone": p}, nil)
	t.Cleanup(providers.Close)
	c := startExample(t, cfg, notifyd.Options{Providers: providers})

	job, err := c.RunSchedule(ctx, "daily-quiz", client.RunRequest{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if job, err = c.Job(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		n := len(p.got)
		p.mu.Unlock()
		if job.State == "DONE" && n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %+v and %d recipients reached after 30 s; want DONE and 3", job, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if job.Done != 4 || job.Failed != 1 || !strings.HasPrefix(job.ContentKey, "quiz-") {
		t.Errorf("job = done %d, failed %d, content key %q; want 4 done, 1 failed, the day's content key", job.Done, job.Failed, job.ContentKey)
	}
	p.mu.Lock()
	for phoneNo, name := range map[string]string{"010-1111-0001": "Minji", "010-1111-0002": "Joon", "010-1111-0003": "Ada"} {
		got := p.got[phoneNo]
		if len(got) != 1 || got[0]["text"] != "Good morning, "+name+"! Today's quiz: Which planet is largest?" ||
			got[0]["choices"] != "Mars / Jupiter / Venus" {
			t.Errorf("%s got %v, want today's quiz once, addressed to %s", phoneNo, got, name)
		}
	}
	if got := p.got["010-1111-0005"]; len(got) != 0 {
		t.Errorf("the opted-out user got %v", got)
	}
	p.mu.Unlock()
	dead, err := c.DLQ(ctx, client.DLQQuery{Channel: "quiz"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead.Notifications) != 1 || dead.Notifications[0].Recipient != "010-1111-0004" || !strings.Contains(dead.Notifications[0].LastError, "name") {
		t.Errorf("dead letters = %+v, want the nameless user's, its reason naming the missing name", dead.Notifications)
	}
	// The same fire time again: refused, nothing sent twice.
	if _, err := c.RunSchedule(ctx, "daily-quiz", client.RunRequest{FireTime: job.FireTime.Format(time.RFC3339)}); err == nil || !strings.Contains(err.Error(), "already ran") {
		t.Errorf("running the same fire time again = %v, want it refused as already ran", err)
	}
}
