package schedule

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk/wire"
)

func TestService_UpsertSubscribers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	n, err := s.UpsertSubscribers(b.ctx, []wire.Subscriber{
		{ExternalID: "u1", Addresses: map[string]string{"quiz": "kakao-1"}, Attributes: map[string]any{"name": "Kim"}, Topics: []string{"daily-quiz", "news"}},
		{ExternalID: "u2", Addresses: map[string]string{"hooks": "https://127.0.0.1/h"}},
		{ExternalID: "u1", Addresses: map[string]string{"quiz": "kakao-1b"}, Attributes: map[string]any{"name": "Kim2"}, Topics: []string{"daily-quiz"}}, // last wins
	})
	if err != nil || n != 2 {
		t.Fatalf("UpsertSubscribers = %d, %v; want 2, nil", n, err)
	}
	got, err := s.GetSubscriber(b.ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Subscriber{ExternalID: "u1", Addresses: map[string]string{"quiz": "kakao-1b"}, Attributes: map[string]any{"name": "Kim2"}, Topics: []string{"daily-quiz"}}
	if got.ExternalID != want.ExternalID || !reflect.DeepEqual(got.Addresses, want.Addresses) ||
		!reflect.DeepEqual(got.Attributes, want.Attributes) || !reflect.DeepEqual(got.Topics, want.Topics) {
		t.Errorf("GetSubscriber(u1) = %+v, want %+v", got, want)
	}

	t.Run("upsert replaces addresses and attributes, adds topics", func(t *testing.T) {
		if _, err := s.UpsertSubscribers(b.ctx, []wire.Subscriber{{ExternalID: "u1", Addresses: map[string]string{"hooks": "h1"}, Topics: []string{"news"}}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSubscriber(b.ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Addresses, map[string]string{"hooks": "h1"}) || len(got.Attributes) != 0 ||
			!reflect.DeepEqual(got.Topics, []string{"daily-quiz", "news"}) {
			t.Errorf("after second upsert: %+v; want addresses {hooks: h1}, no attributes, topics [daily-quiz news]", got)
		}
	})
	t.Run("subscribe and unsubscribe", func(t *testing.T) {
		n, err := s.Subscribe(b.ctx, "news", []string{"u1", "u2"})
		if err != nil || n != 1 {
			t.Errorf("Subscribe = %d, %v; want 1 new (u1 already in), nil", n, err)
		}
		n, err = s.Unsubscribe(b.ctx, "news", []string{"u1"})
		if err != nil || n != 1 {
			t.Errorf("Unsubscribe = %d, %v; want 1, nil", n, err)
		}
		topics, err := s.Topics(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []TopicInfo{{"daily-quiz", 1}, {"news", 1}}; !reflect.DeepEqual(topics, want) {
			t.Errorf("Topics = %v, want %v", topics, want)
		}
		_, err = s.Subscribe(b.ctx, "news", []string{"u2", "ghost", "ghost2"})
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"ghost" "ghost2"`) {
			t.Errorf("Subscribe(unknown) = %v, want ErrNotFound naming ghost and ghost2", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if err := s.DeleteSubscriber(b.ctx, "u2"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSubscriber(b.ctx, "u2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetSubscriber(deleted) = %v, want ErrNotFound", err)
		}
		if err := s.DeleteSubscriber(b.ctx, "u2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteSubscriber(deleted) = %v, want ErrNotFound", err)
		}
		var subs int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM topic_subscriptions WHERE topic = 'news'`).Scan(&subs); err != nil || subs != 0 {
			t.Errorf("news has %d subscriptions after deleting u2 (%v), want 0", subs, err)
		}
	})
}

func TestService_UpsertSubscribers_invalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	tests := []struct {
		name string
		sub  wire.Subscriber
		want string
	}{
		{"no external id", wire.Subscriber{}, "subscriber 1: external_id must be"},
		{"long external id", wire.Subscriber{ExternalID: strings.Repeat("x", 257)}, "external_id must be 1..256"},
		{"bad channel", wire.Subscriber{ExternalID: "u", Addresses: map[string]string{"a b": "x"}}, `address channel "a b"`},
		{"empty address", wire.Subscriber{ExternalID: "u", Addresses: map[string]string{"quiz": ""}}, `address for channel "quiz" is empty`},
		{"bad topic", wire.Subscriber{ExternalID: "u", Topics: []string{"no/slash"}}, `topic "no/slash"`},
		{"unencodable attribute", wire.Subscriber{ExternalID: "u", Attributes: map[string]any{"f": func() {}}}, "attributes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.UpsertSubscribers(b.ctx, []wire.Subscriber{{ExternalID: "ok"}, tt.sub})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("UpsertSubscribers = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM subscribers`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d subscribers written by rejected batches (%v), want 0", n, err)
	}
}

func TestService_UpsertSubscribers_largeBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.service(t, "a")
	subs := make([]wire.Subscriber, MaxUpsertBatch*2+17)
	for i := range subs {
		subs[i] = wire.Subscriber{ExternalID: fmt.Sprintf("u%d", i), Addresses: map[string]string{"quiz": fmt.Sprintf("k%d", i)}, Topics: []string{"all"}}
	}
	n, err := s.UpsertSubscribers(b.ctx, subs)
	if err != nil || n != len(subs) {
		t.Fatalf("UpsertSubscribers = %d, %v; want %d", n, err, len(subs))
	}
	topics, err := s.Topics(b.ctx)
	if err != nil || len(topics) != 1 || topics[0].Subscribers != int64(len(subs)) {
		t.Errorf("Topics = %v, %v; want all: %d", topics, err, len(subs))
	}
}
