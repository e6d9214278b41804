package ui

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/service"
	"github.com/notifyd/notifyd/sdk/wire"
)

const jobsPerPage = 50

// Job states and kinds, as the jobs carry them (wire.Job).
const (
	jobRunning = "RUNNING"
	jobDone    = "DONE"
)

var (
	jobKinds  = []string{"schedule", "campaign"}
	jobStates = []string{"PENDING", jobRunning, jobDone, "FAILED", "CANCELLED", "SKIPPED"}
)

type jobsData struct {
	Enabled    bool // the operations have a schedule service
	Schedules  []wire.Schedule
	Jobs       []jobRow
	Kind       string
	State      string
	Kinds      []string
	States     []string
	Before     int64 // this page: jobs with id < Before (0 = newest)
	Next       int64 // before= of the next page; 0 = this is the last
	StuckAfter time.Duration
	Stuck      int // stuck jobs on this page
}

type jobRow struct {
	wire.Job
	Stuck   bool          // RUNNING, but its owner's heartbeat is older than jobs.stuck_after
	Silence time.Duration // since the last heartbeat (RUNNING jobs)
	Percent int           // done of total, when total is known
}

func (s *server) jobsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	data := jobsData{Kinds: jobKinds, States: jobStates, StuckAfter: s.d.Config.Jobs.StuckAfter, Enabled: true}
	q := r.URL.Query()
	data.Kind, data.State = q.Get("kind"), q.Get("state")
	if data.Kind != "" && !slices.Contains(jobKinds, data.Kind) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("kind=%s: want one of %v", quote(data.Kind), jobKinds))
		return
	}
	if data.State != "" && !slices.Contains(jobStates, data.State) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("state=%s: want one of %v", quote(data.State), jobStates))
		return
	}
	before, err := queryInt(q, "before", 0, 0, 1<<62)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	data.Before = before

	ctx := r.Context()
	schedules, err := s.d.Ops.Schedules(ctx)
	if errors.Is(err, service.ErrNoSchedules) {
		data.Enabled = false
		s.render(w, r, http.StatusOK, "jobs", sess, view{Title: "Jobs", Nav: "jobs", Data: data})
		return
	}
	if err != nil {
		s.failErr(w, r, "list schedules", err)
		return
	}
	data.Schedules = schedules.Schedules
	release, ok := s.hold(w, r, httpguard.JobsPageCharge(jobsPerPage+1))
	if !ok {
		return
	}
	defer release()
	page, err := s.d.Ops.Jobs(ctx, wire.JobQuery{Kind: data.Kind, State: data.State, Before: before, Limit: jobsPerPage + 1})
	jobs := page.Jobs
	if err != nil {
		s.failErr(w, r, "list jobs", err)
		return
	}
	if len(jobs) > jobsPerPage {
		jobs = jobs[:jobsPerPage]
		data.Next = jobs[len(jobs)-1].ID
	}
	now := s.now()
	for _, j := range jobs {
		row := s.jobRow(j, now)
		if row.Stuck {
			data.Stuck++
		}
		data.Jobs = append(data.Jobs, row)
	}
	s.render(w, r, http.StatusOK, "jobs", sess, view{Title: "Jobs", Nav: "jobs", Refresh: 5, Data: data})
}

// jobRow flags a RUNNING job whose heartbeat is older than jobs.stuck_after:
// its owner is gone or wedged, and another instance should take it over.
func (s *server) jobRow(j wire.Job, now time.Time) jobRow {
	row := jobRow{Job: j}
	if j.State == jobRunning {
		beat := j.Heartbeat
		if beat.IsZero() {
			beat = j.StartedAt
		}
		if !beat.IsZero() {
			row.Silence = now.Sub(beat)
			row.Stuck = row.Silence > s.d.Config.Jobs.StuckAfter
		}
	}
	if j.Total != nil && *j.Total > 0 {
		row.Percent = int(min(100, j.Done*100 / *j.Total))
	} else if j.Total != nil || j.State == jobDone {
		row.Percent = 100 // an empty audience is done as soon as it starts
	}
	return row
}
