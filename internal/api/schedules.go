package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/sdk/wire"
)

// scheduleError maps the schedule package's sentinel errors to answers.
func scheduleError(err error) error {
	msg := strings.TrimSuffix(err.Error(), ": "+schedule.ErrInvalid.Error())
	switch {
	case errors.Is(err, schedule.ErrNotFound), errors.Is(err, schedule.ErrUnknownSchedule):
		return notFound("%s", strings.TrimSuffix(strings.TrimSuffix(msg, ": "+schedule.ErrNotFound.Error()), ": "+schedule.ErrUnknownSchedule.Error())+" does not exist")
	case errors.Is(err, schedule.ErrInvalid):
		return invalid("%s", msg)
	case errors.Is(err, schedule.ErrJobFinished):
		return conflict("%s", msg)
	}
	return err
}

// putSubscriber: PUT /v1/subscribers/{id}: create or replace (addresses and
// attributes as given; topics added), answered with the stored subscriber.
func (s *Server) putSubscriber(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	sub, e := decodeSubscriber(r.Body, id)
	if e != nil {
		return e
	}
	if _, err := s.schedules.UpsertSubscribers(r.Context(), []schedule.Subscriber{sub}); err != nil {
		return scheduleError(err)
	}
	got, err := s.schedules.GetSubscriber(r.Context(), id)
	if err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusOK, subscriberOut(got))
	return nil
}

// getSubscriber: GET /v1/subscribers/{id}.
func (s *Server) getSubscriber(w http.ResponseWriter, r *http.Request) error {
	got, err := s.schedules.GetSubscriber(r.Context(), r.PathValue("id"))
	if err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusOK, subscriberOut(got))
	return nil
}

// deleteSubscriber: DELETE /v1/subscribers/{id}; 204.
func (s *Server) deleteSubscriber(w http.ResponseWriter, r *http.Request) error {
	if err := s.schedules.DeleteSubscriber(r.Context(), r.PathValue("id")); err != nil {
		return scheduleError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func subscriberOut(s *schedule.Subscriber) wire.Subscriber {
	out := wire.Subscriber{
		ExternalID: s.ExternalID, Addresses: s.Addresses, Attributes: s.Attributes, Topics: s.Topics,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if out.Topics == nil {
		out.Topics = []string{}
	}
	return out
}

// listSchedules: GET /v1/schedules.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	infos, err := s.schedules.Schedules(r.Context())
	if err != nil {
		return err
	}
	out := wire.Schedules{Schedules: make([]wire.Schedule, len(infos))}
	for i, in := range infos {
		out.Schedules[i] = wire.Schedule{
			Name: in.Name, Channel: in.Channel, Cron: in.Cron, Timezone: in.Timezone,
			Lead: wire.Duration(in.Lead), MaxLate: wire.Duration(in.MaxLate),
			Audience: wire.Audience{Topic: in.Audience.Topic, Query: in.Audience.Query, Key: in.Audience.Key},
			NextFire: in.NextFire,
		}
		if in.LastRun != nil {
			j := jobOut(in.LastRun)
			out.Schedules[i].LastRun = &j
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// runSchedule: POST /v1/schedules/{name}/run with an optional
// {"fire_time": RFC 3339 | "last", "force": bool}: 202 with the job when a
// run was created or resumed, 200 when the fire time's run is already
// pending or running, 409 when it already ran (DONE) and force is not set
// (docs/api.md). A serving instance materialises it.
func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request) error {
	o, e := decodeRun(r.Body)
	if e != nil {
		return e
	}
	job, outcome, err := s.schedules.RunNow(r.Context(), r.PathValue("name"), o)
	if errors.Is(err, schedule.ErrAlreadyRan) {
		return conflict("%s", strings.TrimSuffix(err.Error(), ": "+schedule.ErrAlreadyRan.Error()))
	}
	if err != nil {
		return scheduleError(err)
	}
	out := jobOut(job)
	out.Outcome = outcome
	code := http.StatusAccepted
	if outcome == schedule.RunExists {
		code = http.StatusOK
	}
	writeJSON(w, code, out)
	return nil
}

// createCampaign: POST /v1/campaigns; 202 with the campaign's job.
func (s *Server) createCampaign(w http.ResponseWriter, r *http.Request) error {
	c, e := decodeCampaign(r.Body)
	if e != nil {
		return e
	}
	job, err := s.schedules.CreateCampaign(r.Context(), c)
	if err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusAccepted, jobOut(job))
	return nil
}

var jobStates = []string{
	string(schedule.JobPending), string(schedule.JobRunning), string(schedule.JobDone),
	string(schedule.JobFailed), string(schedule.JobCancelled), string(schedule.JobSkipped),
}

// listJobs: GET /v1/jobs?kind=&schedule=&state=&before=&limit=, newest first.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := schedule.JobFilter{Kind: q.Get("kind"), Schedule: q.Get("schedule"), State: schedule.JobState(q.Get("state"))}
	if f.Kind != "" && f.Kind != schedule.KindSchedule && f.Kind != schedule.KindCampaign {
		return badRequest("query parameter kind: %q is not schedule or campaign", f.Kind)
	}
	if f.State != "" && !slices.Contains(jobStates, string(f.State)) {
		return badRequest("query parameter state: %q is not one of %s", f.State, strings.Join(jobStates, ", "))
	}
	before, e := queryInt(r, "before", 0, 0, 1<<62)
	if e != nil {
		return e
	}
	limit, e := queryInt(r, "limit", 50, 1, 1000)
	if e != nil {
		return e
	}
	f.BeforeID, f.Limit = before, int(limit)
	jobs, err := s.schedules.ListJobs(r.Context(), f)
	if err != nil {
		return err
	}
	out := wire.Jobs{Jobs: make([]wire.Job, len(jobs))}
	for i, j := range jobs {
		out.Jobs[i] = jobOut(j)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getJob: GET /v1/jobs/{id}.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, e := parseID(r, "job")
	if e != nil {
		return e
	}
	job, err := s.schedules.GetJob(r.Context(), id)
	if err != nil {
		return scheduleError(err)
	}
	writeJSON(w, http.StatusOK, jobOut(job))
	return nil
}

func jobOut(j *schedule.Job) wire.Job {
	out := wire.Job{
		ID: j.ID, Kind: j.Kind, Schedule: j.Schedule, FireTime: j.FireTime, Timezone: j.Timezone,
		Channel: j.Channel, Payload: j.Payload, State: string(j.State), Cursor: j.Cursor,
		Audience: wire.Audience{Topic: j.Audience.Topic, Query: j.Audience.Query, Key: j.Audience.Key},
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
