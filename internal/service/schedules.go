package service

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/sdk/wire"
)

// scheduleError turns the schedule package's sentinel errors into the
// service's refusals, with their messages as every door shows them; any
// other error is returned as it is.
func scheduleError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, schedule.ErrAlreadyRan) {
		return refuse(Conflict, "%s", strings.TrimSuffix(err.Error(), ": "+schedule.ErrAlreadyRan.Error()))
	}
	msg := strings.TrimSuffix(err.Error(), ": "+schedule.ErrInvalid.Error())
	switch {
	case errors.Is(err, schedule.ErrNotFound), errors.Is(err, schedule.ErrUnknownSchedule):
		msg = strings.TrimSuffix(strings.TrimSuffix(msg, ": "+schedule.ErrNotFound.Error()), ": "+schedule.ErrUnknownSchedule.Error())
		return refuse(NotFound, "%s does not exist", msg)
	case errors.Is(err, schedule.ErrInvalid):
		return refuse(Invalid, "%s", msg)
	case errors.Is(err, schedule.ErrJobFinished):
		return refuse(Conflict, "%s", msg)
	}
	return err
}

// PutSubscriber creates or replaces a subscriber (addresses and attributes
// as given; topics added) and answers it as stored.
func (s *Service) PutSubscriber(ctx context.Context, sub wire.Subscriber) (wire.Subscriber, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Subscriber{}, err
	}
	if len(sub.ExternalID) > schedule.MaxExternalIDLen {
		return wire.Subscriber{}, refuse(Invalid, "subscriber id: %d bytes long, at most %d", len(sub.ExternalID), schedule.MaxExternalIDLen)
	}
	in := schedule.Subscriber{ExternalID: sub.ExternalID, Addresses: sub.Addresses, Attributes: sub.Attributes, Topics: sub.Topics}
	if _, err := s.sched.UpsertSubscribers(ctx, []schedule.Subscriber{in}); err != nil {
		return wire.Subscriber{}, scheduleError(err)
	}
	return s.Subscriber(ctx, sub.ExternalID)
}

// Subscriber reads one subscriber with its topics; NotFound when there is
// none.
func (s *Service) Subscriber(ctx context.Context, id string) (wire.Subscriber, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Subscriber{}, err
	}
	got, err := s.sched.GetSubscriber(ctx, id)
	if err != nil {
		return wire.Subscriber{}, scheduleError(err)
	}
	out := wire.Subscriber{
		ExternalID: got.ExternalID, Addresses: got.Addresses, Attributes: got.Attributes, Topics: got.Topics,
		CreatedAt: got.CreatedAt, UpdatedAt: got.UpdatedAt,
	}
	if out.Topics == nil {
		out.Topics = []string{}
	}
	return out, nil
}

// DeleteSubscriber deletes one subscriber; NotFound when there is none.
func (s *Service) DeleteSubscriber(ctx context.Context, id string) error {
	if err := s.needSchedules(); err != nil {
		return err
	}
	return scheduleError(s.sched.DeleteSubscriber(ctx, id))
}

// Schedules lists the configured schedules, by name, with their next fire
// time and latest run.
func (s *Service) Schedules(ctx context.Context) (wire.Schedules, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Schedules{}, err
	}
	infos, err := s.sched.Schedules(ctx)
	if err != nil {
		return wire.Schedules{}, err
	}
	out := wire.Schedules{Schedules: make([]wire.Schedule, len(infos))}
	for i, in := range infos {
		out.Schedules[i] = wire.Schedule{
			Name: in.Name, Channel: in.Channel, Cron: in.Cron, Timezone: in.Timezone,
			Lead: wire.Duration(in.Lead), MaxLate: wire.Duration(in.MaxLate),
			Audience: audience(in.Audience), NextFire: in.NextFire,
		}
		if in.LastRun != nil {
			j := jobOut(in.LastRun)
			out.Schedules[i].LastRun = &j
		}
	}
	return out, nil
}

// RunSchedule creates or resumes a run of schedule name for the request's
// fire time ("" now, "last" the latest at or before now, or an RFC 3339
// time), or forces a re-run (schedule.Service.RunNow). The job's Outcome says
// what happened; a fire time that already ran, without Force, is a
// Conflict.
func (s *Service) RunSchedule(ctx context.Context, name string, req wire.RunRequest) (wire.Job, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Job{}, err
	}
	o := schedule.RunOptions{Force: req.Force}
	switch req.FireTime {
	case "":
	case "last":
		o.Last = true
	default:
		t, err := time.Parse(time.RFC3339, req.FireTime)
		if err != nil {
			return wire.Job{}, refuse(Invalid, "fire_time: %q is not an RFC 3339 time (2026-11-25T08:00:00+09:00) or \"last\"", outbox.Truncate(req.FireTime, 64))
		}
		o.FireTime = t
	}
	job, outcome, err := s.sched.RunNow(ctx, name, o)
	if err != nil {
		return wire.Job{}, scheduleError(err)
	}
	out := jobOut(job)
	out.Outcome = outcome
	return out, nil
}

// CreateCampaign validates a campaign (channel configured, audience,
// payload templates) and creates its job, PENDING, due now.
func (s *Service) CreateCampaign(ctx context.Context, c wire.Campaign) (wire.Job, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Job{}, err
	}
	job, err := s.sched.CreateCampaign(ctx, schedule.Campaign{
		Channel: c.Channel, Payload: c.Payload, ContentKey: c.ContentKey,
		Audience: config.Audience{Topic: c.Audience.Topic, Query: c.Audience.Query, Key: c.Audience.Key},
	})
	if err != nil {
		return wire.Job{}, scheduleError(err)
	}
	return jobOut(job), nil
}

// Jobs lists bulk jobs newest first, filtered by kind, schedule and state,
// with ids below q.Before; q.Limit 0 is 50, at most 1000.
func (s *Service) Jobs(ctx context.Context, q wire.JobQuery) (wire.Jobs, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Jobs{}, err
	}
	jobs, err := s.sched.ListJobs(ctx, schedule.JobFilter{
		Kind: q.Kind, Schedule: q.Schedule, State: schedule.JobState(q.State), BeforeID: q.Before, Limit: q.Limit,
	})
	if err != nil {
		return wire.Jobs{}, err
	}
	out := wire.Jobs{Jobs: make([]wire.Job, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = jobOut(j)
	}
	return out, nil
}

// Job reads one job; NotFound when there is none.
func (s *Service) Job(ctx context.Context, id int64) (wire.Job, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Job{}, err
	}
	job, err := s.sched.GetJob(ctx, id)
	if err != nil {
		return wire.Job{}, scheduleError(err)
	}
	return jobOut(job), nil
}

func audience(a config.Audience) wire.Audience {
	return wire.Audience{Topic: a.Topic, Query: a.Query, Key: a.Key}
}

// jobOut is the wire form of a job, with its progress when its total is
// known.
func jobOut(j *schedule.Job) wire.Job {
	out := wire.Job{
		ID: j.ID, Kind: j.Kind, Schedule: j.Schedule, FireTime: j.FireTime, Timezone: j.Timezone,
		Channel: j.Channel, Payload: j.Payload, State: string(j.State), Cursor: j.Cursor,
		Audience: audience(j.Audience),
		Done:     j.Done, Skipped: j.Skipped, Failed: j.Failed, Total: j.Total, Owner: j.Owner, Heartbeat: j.Heartbeat,
		Error: j.Error, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, UpdatedAt: j.UpdatedAt,
		Rerun: j.Rerun, ContentKey: j.ContentKey,
	}
	if j.Total != nil {
		p := 1.0
		if *j.Total > 0 {
			p = min(1, float64(j.Done)/float64(*j.Total))
		}
		out.Progress = &p
	}
	return out
}

// ImportSubscribers creates or replaces subscribers as PutSubscriber does,
// many in one statement (the CLI's `subscribers import`), and answers how many
// it wrote.
func (s *Service) ImportSubscribers(ctx context.Context, subs []wire.Subscriber) (int, error) {
	if err := s.needSchedules(); err != nil {
		return 0, err
	}
	in := make([]schedule.Subscriber, len(subs))
	for i, sub := range subs {
		in[i] = schedule.Subscriber{ExternalID: sub.ExternalID, Addresses: sub.Addresses, Attributes: sub.Attributes, Topics: sub.Topics}
	}
	n, err := s.sched.UpsertSubscribers(ctx, in)
	return n, scheduleError(err)
}

// RunJob materialises a PENDING job in this process and answers it once it
// has finished (the CLI's `campaign --run`); Conflict when another instance
// has taken it or it has finished.
func (s *Service) RunJob(ctx context.Context, id int64) (wire.Job, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Job{}, err
	}
	job, err := s.sched.RunJob(ctx, id)
	if err != nil {
		return wire.Job{}, scheduleError(err)
	}
	return jobOut(job), nil
}

// CancelJob cancels a job that has not finished, and its notifications still
// PENDING; it answers the job and how many notifications it cancelled.
func (s *Service) CancelJob(ctx context.Context, id int64) (wire.Job, int64, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Job{}, 0, err
	}
	job, n, err := s.sched.CancelJob(ctx, id)
	if err != nil {
		return wire.Job{}, 0, scheduleError(err)
	}
	return jobOut(job), n, nil
}
