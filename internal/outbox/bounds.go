package outbox

import "github.com/notifyd/notifyd/sdk/wire"

// The bounds of what the outbox stores, defined once in sdk/wire (which
// explains each) so that every entrance — the API, the CLI, EnqueueTx,
// schedule and campaign rendering, provider verdicts — holds a value to the
// same figure. docs/config.md ("Bounds") lists them.
const (
	MaxInsertBatch       = wire.MaxInsertBatch
	MaxChannelLen        = wire.MaxChannelLen
	MaxRecipientLen      = wire.MaxRecipientLen
	MaxIdempotencyKeyLen = wire.MaxIdempotencyKeyLen
	MaxPayloadBytes      = wire.MaxPayloadBytes
	MaxReasonLen         = wire.MaxReasonLen
	MaxErrorLen          = wire.MaxErrorLen
	MaxProviderCodeLen   = wire.MaxProviderCodeLen
	MaxResultBytes       = wire.MaxResultBytes
)
