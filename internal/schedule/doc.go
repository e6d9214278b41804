// Package schedule turns audiences into PENDING notifications ahead of time
// (docs/design.md §6): subscribers and topics, schedules, and the resumable bulk jobs
// that schedule runs and campaigns are.
//
// A schedule (cron + IANA time zone) gets one run per fire time, created
// `lead` before it by whichever instance evaluates it first (a unique
// constraint on (schedule, fire_time) makes the race harmless). A run is a
// bulk job: the audience is read in keyset-ordered chunks, and each chunk
// inserts its PENDING rows (ON CONFLICT (idempotency_key) DO NOTHING) and
// advances the job's cursor in one transaction, guarded on the job's owner,
// state and previous cursor, so a crash resumes at the cursor, a re-run chunk
// creates nothing twice and a deposed owner commits nothing. A RUNNING job
// whose heartbeat is older than jobs.stuck_after is taken over by another
// instance with an UPDATE conditional on the owner and heartbeat it saw.
//
// Audiences: a topic (the recipient is each subscriber's address on the
// job's channel; subscribers without one are skipped and counted), or an
// operator's SQL query against the same database returning recipient, an
// optional data column and the column named by audience.key, which must be
// unique and orderable (bigint, uuid, text, timestamptz …): the query is read
// as SELECT … FROM (<query>) q WHERE key > $cursor ORDER BY key LIMIT n.
//
// A static payload to a topic is materialised entirely inside Postgres (one
// statement per chunk pages the topic, advances the job and inserts); any
// other job is read ahead in keyset pages and rendered in Go while the
// previous page commits. Chunks commit with synchronous_commit off on the
// job's own connection: a chunk's rows and its cursor are lost or kept
// together, so a Postgres crash only rewinds the job.
//
// Job states: PENDING → RUNNING → DONE | FAILED | CANCELLED, and SKIPPED for a
// fire time missed by more than max_late while every instance was down.
//
// Payloads are templates: every string leaf of the payload map that contains
// "{{" is a text/template rendered per recipient over
//
//	.recipient  the recipient (address on the channel)
//	.data       the recipient's data: subscriber attributes for a topic, the
//	            data column for a query audience
//	.fire_time  the run's fire time in the schedule's zone (a time.Time);
//	            a campaign's creation time
//	.schedule   the schedule's name ("" for a campaign)
//
// A missing map key is an error (missingkey=error): use
// {{with index .data "k"}}{{.}}{{end}} for optional fields. Other leaves and
// all keys are copied as they are.
//
// A render error fails one recipient, never the run: a member whose payload
// cannot be rendered (a missing key, a template error), whose rendered
// payload passes http.max_payload_bytes or MaxRangeIterations, or whose
// recipient cannot be stored (over 1,024 bytes, invalid UTF-8, NUL) gets a
// FAILED notification with the reason (under the same idempotency key, a
// hash of the recipient when it is too long), counted in the job's failed;
// the job goes on. A recipient is read back within its bound: of a longer
// one only the beginning reaches notifyd, with its length and hash computed
// in Postgres (boundedRecipientCols), and a topic materialised in Postgres
// fails it the same way; an audience query's key past maxKeyLen fails the
// job. A template is at most MaxTemplateBytes; printf widths are
// bounded; it may call only the functions of templateFuncList, and what they
// and its methods build is held to RenderMemoryFactor × the payload bound. A job whose owners keep dying at the same cursor (a job that
// crashes the process) is failed after jobs.max_takeovers takeovers.
//
// Idempotency keys — one notification per recipient per content (see
// jobRow.idempotencyPrefix): "schedule:<name>:<fire time RFC3339>:<recipient>"
// for runs, "campaign:<job id>:<recipient>" for campaigns, and
// "content:<channel>:<content key>:<recipient>" for either when it names its
// content (schedules.<name>.content_key, a campaign's content_key), shared by
// every job naming that content on the channel; a forced re-run appends
// "rerun<n>:". RunNow of a fire time returns its run, resumes it (FAILED,
// CANCELLED, SKIPPED: from the cursor, under the same keys) or refuses it
// (DONE) unless forced.
//
// One RUNNING job per audience (channel and topic, or channel and query):
// a job whose audience is busy waits PENDING (jobs_one_running_per_audience).
package schedule
