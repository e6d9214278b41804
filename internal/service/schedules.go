package service

import (
	"context"
	"errors"
	"strings"
	"time"

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
	if _, err := s.sched.UpsertSubscribers(ctx, []wire.Subscriber{sub}); err != nil {
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
	sub, err := s.sched.GetSubscriber(ctx, id)
	return sub, scheduleError(err)
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
	list, err := s.sched.Schedules(ctx)
	if err != nil {
		return wire.Schedules{}, err
	}
	return wire.Schedules{Schedules: list}, nil
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
			return wire.Job{}, refuse(Invalid, "fire_time: %q is not an RFC 3339 time (2026-11-25T08:00:00+09:00) or \"last\"", wire.Truncate(req.FireTime, 64))
		}
		// Go's zero time is RunOptions' "now": a run asked for 0001-01-01
		// would silently be a run of now, sent to the whole audience.
		if t.IsZero() {
			return wire.Job{}, refuse(Invalid, "fire_time: %q is the zero time (0001-01-01T00:00:00Z), which a run cannot have; give a later fire time, \"last\", or none to run now",
				wire.Truncate(req.FireTime, 64))
		}
		o.FireTime = t
	}
	job, err := s.sched.RunNow(ctx, name, o)
	if err != nil {
		return wire.Job{}, scheduleError(err)
	}
	return job, nil
}

// CreateCampaign validates a campaign (channel configured, audience,
// payload templates) and creates its job, PENDING, due now.
func (s *Service) CreateCampaign(ctx context.Context, c wire.Campaign) (wire.Job, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Job{}, err
	}
	job, err := s.sched.CreateCampaign(ctx, c)
	if err != nil {
		return wire.Job{}, scheduleError(err)
	}
	return job, nil
}

// Jobs lists bulk jobs newest first, filtered by kind, schedule and state,
// with ids below q.Before; q.Limit 0 is 50, at most 1000.
func (s *Service) Jobs(ctx context.Context, q wire.JobQuery) (wire.Jobs, error) {
	if err := s.needSchedules(); err != nil {
		return wire.Jobs{}, err
	}
	jobs, err := s.sched.ListJobs(ctx, q)
	if err != nil {
		return wire.Jobs{}, err
	}
	if jobs == nil {
		jobs = []wire.Job{} // "jobs": [], never null
	}
	return wire.Jobs{Jobs: jobs}, nil
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
	return job, nil
}

// ImportSubscribers creates or replaces subscribers as PutSubscriber does,
// many in one statement (the CLI's `subscribers import`), and answers how many
// it wrote.
func (s *Service) ImportSubscribers(ctx context.Context, subs []wire.Subscriber) (int, error) {
	if err := s.needSchedules(); err != nil {
		return 0, err
	}
	n, err := s.sched.UpsertSubscribers(ctx, subs)
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
	return job, nil
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
	return job, n, nil
}
