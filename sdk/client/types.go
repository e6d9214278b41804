package client

import "github.com/notifyd/notifyd/sdk/wire"

// The API's JSON types are defined once, in sdk/wire, which the server
// encodes with; they are re-exported here so a client user writes
// client.Notification and imports one package.
type (
	Notification        = wire.Notification
	Enqueued            = wire.Enqueued
	EnqueueBatchRequest = wire.EnqueueBatchRequest
	EnqueuedBatch       = wire.EnqueuedBatch
	NotificationInfo    = wire.NotificationInfo
	Attempt             = wire.Attempt
	Cancelled           = wire.Cancelled
	DLQQuery            = wire.DLQQuery
	DLQPage             = wire.DLQPage
	DLQSelector         = wire.DLQSelector
	Replayed            = wire.Replayed
	Purged              = wire.Purged
	Skipped             = wire.Skipped
	ChannelStats        = wire.ChannelStats
	Channels            = wire.Channels
	Subscriber          = wire.Subscriber
	Audience            = wire.Audience
	Schedule            = wire.Schedule
	Schedules           = wire.Schedules
	Campaign            = wire.Campaign
	RunRequest          = wire.RunRequest
	Job                 = wire.Job
	JobQuery            = wire.JobQuery
	Jobs                = wire.Jobs
	Readiness           = wire.Readiness
	Duration            = wire.Duration
	ErrorBody           = wire.ErrorBody
	ErrorDetail         = wire.ErrorDetail
	PauseRequest        = wire.PauseRequest
	ChannelControl      = wire.ChannelControl
)

// Statuses, error codes, the batch bound and run outcomes, as in sdk/wire.
const (
	StatusPending        = wire.StatusPending
	StatusQueued         = wire.StatusQueued
	StatusProcessing     = wire.StatusProcessing
	StatusSent           = wire.StatusSent
	StatusFailed         = wire.StatusFailed
	StatusCancelled      = wire.StatusCancelled
	CodeBadRequest       = wire.CodeBadRequest
	CodeUnauthorized     = wire.CodeUnauthorized
	CodeNotFound         = wire.CodeNotFound
	CodeMethodNotAllowed = wire.CodeMethodNotAllowed
	CodeConflict         = wire.CodeConflict
	CodeBodyTooLarge     = wire.CodeBodyTooLarge
	CodeInvalid          = wire.CodeInvalid
	CodeTooManyRequests  = wire.CodeTooManyRequests
	CodeInternal         = wire.CodeInternal
	CodeUnavailable      = wire.CodeUnavailable
	MaxBatch             = wire.MaxBatch
	RunCreated           = wire.RunCreated
	RunResumed           = wire.RunResumed
	RunExists            = wire.RunExists
)
