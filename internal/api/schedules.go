package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/sdk/wire"
)

// putSubscriber: PUT /v1/subscribers/{id}: create or replace (addresses and
// attributes as given; topics added), answered with the stored subscriber.
func (s *Server) putSubscriber(w http.ResponseWriter, r *http.Request) error {
	sub, e := decodeSubscriber(r.Body, r.PathValue("id"))
	if e != nil {
		return e
	}
	// The answer is the subscriber as stored, read back: topics added
	// before (by SQL of one's own too) are in it.
	return answerHeld(w, r, httpguard.SubscriberBytes, http.StatusOK, func(ctx context.Context) (wire.Subscriber, error) {
		return s.ops.PutSubscriber(ctx, sub)
	})
}

// getSubscriber: GET /v1/subscribers/{id}, holding a subscriber's read
// bound (httpguard.SubscriberBytes) of the bound on answers in flight.
func (s *Server) getSubscriber(w http.ResponseWriter, r *http.Request) error {
	return answerHeld(w, r, httpguard.SubscriberBytes, http.StatusOK, func(ctx context.Context) (wire.Subscriber, error) {
		return s.ops.Subscriber(ctx, r.PathValue("id"))
	})
}

// deleteSubscriber: DELETE /v1/subscribers/{id}; 204.
func (s *Server) deleteSubscriber(w http.ResponseWriter, r *http.Request) error {
	if err := s.ops.DeleteSubscriber(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listSchedules: GET /v1/schedules.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	out, err := s.ops.Schedules(r.Context())
	if err != nil {
		return err
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
	req, e := decodeRun(r.Body)
	if e != nil {
		return e
	}
	release, err := holdAnswer(r, httpguard.JobBytes) // the job, read back
	if err != nil {
		return err
	}
	defer release()
	job, err := s.ops.RunSchedule(r.Context(), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	code := http.StatusAccepted
	if job.Outcome == wire.RunExists {
		code = http.StatusOK
	}
	writeAnswer(w, r, code, job)
	return nil
}

// createCampaign: POST /v1/campaigns; 202 with the campaign's job.
func (s *Server) createCampaign(w http.ResponseWriter, r *http.Request) error {
	c, e := decodeCampaign(r.Body)
	if e != nil {
		return e
	}
	// The answer is the campaign's job, read back.
	return answerHeld(w, r, httpguard.JobBytes, http.StatusAccepted, func(ctx context.Context) (wire.Job, error) {
		return s.ops.CreateCampaign(ctx, c)
	})
}

// Job kinds and states a jobs query may name.
var (
	jobKinds  = []string{"schedule", "campaign"}
	jobStates = []string{"PENDING", "RUNNING", "DONE", "FAILED", "CANCELLED", "SKIPPED"}
)

// listJobs: GET /v1/jobs?kind=&schedule=&state=&before=&limit=, newest
// first, holding its share of the bound on answers in flight until it has
// answered (httpguard.HoldAnswer).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := wire.JobQuery{Kind: q.Get("kind"), Schedule: q.Get("schedule"), State: q.Get("state")}
	if f.Kind != "" && !slices.Contains(jobKinds, f.Kind) {
		return badRequest("query parameter kind: %q is not schedule or campaign", f.Kind)
	}
	if f.State != "" && !slices.Contains(jobStates, f.State) {
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
	f.Before, f.Limit = before, int(limit)
	return answerHeld(w, r, httpguard.JobsPageCharge(f.Limit), http.StatusOK, func(ctx context.Context) (wire.Jobs, error) {
		return s.ops.Jobs(ctx, f)
	})
}

// getJob: GET /v1/jobs/{id}, holding a job's read bound
// (httpguard.JobBytes) of the bound on answers in flight.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, e := parseID(r, "job")
	if e != nil {
		return e
	}
	return answerHeld(w, r, httpguard.JobBytes, http.StatusOK, func(ctx context.Context) (wire.Job, error) {
		return s.ops.Job(ctx, id)
	})
}
