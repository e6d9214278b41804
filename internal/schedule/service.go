package schedule

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Defaults for Options.
const (
	PollIntervalDefault = time.Second
	MaxJobsDefault      = 2
)

// Errors callers branch on.
var (
	ErrNotFound        = errors.New("not found")
	ErrUnknownSchedule = errors.New("unknown schedule")
	ErrJobFinished     = errors.New("job already finished")
	ErrInvalid         = errors.New("invalid input")
)

// errAbandon, returned by a test's afterChunk hook, makes the worker stop as
// if its process had died: no release, no final update, heartbeat stopped.
var errAbandon = errors.New("worker abandoned the job")

// Options tune a Service; zero values take the named defaults.
type Options struct {
	Logger hclog.Logger
	// Now is the clock (schedules, heartbeats, staleness); tests inject one.
	Now func() time.Time
	// InstanceID names this instance as a job owner; default
	// config instance.id, else hostname-pid-random.
	InstanceID string
	// PollInterval is how often Start evaluates schedules and looks for jobs.
	PollInterval time.Duration
	// MaxJobs is how many jobs this instance materialises at once.
	MaxJobs int
}

// Service evaluates schedules and runs bulk jobs; it is also the Go API for
// subscribers, topics, schedules, campaigns and jobs.
type Service struct {
	pool      *pgxpool.Pool
	cfg       *config.Config
	log       hclog.Logger
	now       func() time.Time
	owner     string
	poll      time.Duration
	maxJobs   int
	schedules map[string]*compiledSchedule

	mu       sync.Mutex
	active   map[int64]bool // jobs this instance is materialising
	cancel   context.CancelFunc
	isStop   bool
	wg       sync.WaitGroup
	loopDone chan struct{}

	// audienceStatement bounds each statement an audience query runs
	// (MaxAudienceStatement; tests shorten it).
	audienceStatement time.Duration

	// Test hooks: called before each chunk's transaction (n chunks committed
	// so far) and after each commit (n committed).
	beforeChunk func(job int64, n int)
	afterChunk  func(job int64, n int) error
}

// New compiles every configured schedule (cron, time zone, audience shape,
// payload templates); an error names the schedule. Audience queries are
// checked against the database by Start (or CheckAudiences).
func New(pool *pgxpool.Pool, cfg *config.Config, opts Options) (*Service, error) {
	if pool == nil || cfg == nil {
		return nil, errors.New("schedule: New needs a pool and a config")
	}
	s := &Service{
		pool:      pool,
		cfg:       cfg,
		log:       cmp.Or(opts.Logger, hclog.NewNullLogger()),
		now:       opts.Now,
		owner:     cmp.Or(opts.InstanceID, cfg.Instance.ID),
		poll:      cmp.Or(opts.PollInterval, PollIntervalDefault),
		maxJobs:   cmp.Or(opts.MaxJobs, MaxJobsDefault),
		schedules: map[string]*compiledSchedule{},
		active:    map[int64]bool{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.owner == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		s.owner = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "notifyd"), os.Getpid(), hex.EncodeToString(b))
	}
	if s.cfg.Jobs.ChunkSize <= 0 || s.cfg.Jobs.Heartbeat <= 0 || s.cfg.Jobs.StuckAfter <= 0 {
		return nil, errors.New("schedule: jobs.chunk_size, jobs.heartbeat and jobs.stuck_after must be set (config.Load fills them)")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Schedules)) { // the first bad one, every time
		c, err := compileSchedule(name, cfg.Schedules[name])
		if err != nil {
			return nil, err
		}
		s.schedules[name] = c
	}
	return s, nil
}

// Owner is the name this instance writes into the jobs it runs.
func (s *Service) Owner() string { return s.owner }

// CheckAudiences runs every schedule's audience query with LIMIT 0 and checks
// it returns recipient and the key column. The error names the schedule.
func (s *Service) CheckAudiences(ctx context.Context) error {
	var errs []error
	for _, name := range s.scheduleNames() {
		c := s.schedules[name]
		if c.cfg.Audience.Query == "" {
			continue
		}
		if err := newQueryAudience(c.cfg.Audience.Query, c.cfg.Audience.Key).check(ctx, s.pool); err != nil {
			errs = append(errs, fmt.Errorf("schedule %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Start checks the audiences and then, until Stop, evaluates schedules and
// claims, takes over and runs jobs every PollInterval.
func (s *Service) Start(ctx context.Context) error {
	if err := s.CheckAudiences(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("schedule: service already started")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.loopDone = make(chan struct{})
	go s.loop(ctx)
	return nil
}

// Stop ends the loop and every running job and waits for them, or for ctx;
// a job stopped half-way is handed back (PENDING, cursor kept) for any
// instance to resume.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.loopDone
	s.isStop = true
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	stopped := make(chan struct{})
	go func() {
		<-done
		s.wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("schedule: stop: %w", ctx.Err())
	}
}

func (s *Service) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isStop
}

func (s *Service) loop(ctx context.Context) {
	defer close(s.loopDone)
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		if err := s.evaluate(ctx, s.now()); err != nil && ctx.Err() == nil {
			s.log.Error("evaluate schedules", "error", err)
		}
		for s.activeCount() < s.maxJobs && ctx.Err() == nil {
			job, err := s.acquire(ctx, 0)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("acquire job", "error", err)
				}
				break
			}
			if job == nil {
				break
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.release(job.ID)
				if err := s.runJob(ctx, job); err != nil {
					s.log.Error("job stopped", "job", job.ID, "error", err)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce evaluates the schedules once, then claims or takes over jobs and
// runs each to its end, until none is left for this instance. Tests call it
// in place of Start.
func (s *Service) RunOnce(ctx context.Context) error {
	if err := s.evaluate(ctx, s.now()); err != nil {
		return err
	}
	for {
		job, err := s.acquire(ctx, 0)
		if err != nil || job == nil {
			return err
		}
		err = s.runJob(ctx, job)
		s.release(job.ID)
		if err != nil {
			return err
		}
	}
}

// RunJob claims one PENDING job by id and runs it here to its end (the CLI's
// campaign --run). It returns ErrJobFinished if the job is not PENDING.
func (s *Service) RunJob(ctx context.Context, id int64) (wire.Job, error) {
	job, err := s.acquire(ctx, id)
	if err != nil {
		return wire.Job{}, err
	}
	if job == nil {
		return wire.Job{}, fmt.Errorf("job %d is not PENDING (or its schedule has a RUNNING job): %w", id, ErrJobFinished)
	}
	err = s.runJob(ctx, job)
	s.release(job.ID)
	if err != nil {
		return wire.Job{}, err
	}
	return s.GetJob(ctx, id)
}

// acquire claims a PENDING job (onlyID if non-zero) or, failing that, takes
// over a stuck RUNNING one, and marks it active here.
func (s *Service) acquire(ctx context.Context, onlyID int64) (*jobRow, error) {
	s.mu.Lock()
	exclude := make([]int64, 0, len(s.active))
	for id := range s.active {
		exclude = append(exclude, id)
	}
	s.mu.Unlock()
	now := s.now()
	job, err := jobClaim(ctx, s.pool, s.owner, now, exclude, onlyID)
	if err == nil && job == nil && onlyID == 0 {
		job, err = jobTakeOver(ctx, s.pool, s.owner, now, now.Add(-s.cfg.Jobs.StuckAfter), exclude)
		if job != nil {
			s.log.Info("took over stuck job", "job", job.ID, "schedule", job.Schedule, "cursor", job.Cursor, "done", job.Done)
		}
	}
	if err != nil || job == nil {
		return nil, err
	}
	s.mu.Lock()
	s.active[job.ID] = true
	s.mu.Unlock()
	return job, nil
}

func (s *Service) release(id int64) {
	s.mu.Lock()
	delete(s.active, id)
	s.mu.Unlock()
}

func (s *Service) activeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

func (s *Service) scheduleNames() []string {
	names := make([]string, 0, len(s.schedules))
	for n := range s.schedules {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
