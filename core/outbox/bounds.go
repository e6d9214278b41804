package outbox

// The bounds of what the outbox stores. Every entrance (the API, the CLI,
// EnqueueTx, schedule and campaign rendering, provider verdicts) is held to
// them, so a value the database cannot index or a reader cannot page through
// is refused where it enters, with the field named, rather than failing a
// batch deep in the pipeline. docs/config.md ("Bounds") lists them.
const (
	// MaxInsertBatch is the most notifications one Insert takes: one
	// statement, a few MB of parameters.
	MaxInsertBatch = 10_000

	// MaxChannelLen, MaxRecipientLen and MaxIdempotencyKeyLen bound the
	// indexed text columns in bytes. A btree entry must stay under 2,704
	// bytes: a 3,200-byte recipient once failed every settle of its row.
	MaxChannelLen        = 200
	MaxRecipientLen      = 1024
	MaxIdempotencyKeyLen = 512

	// MaxPayloadBytes is the ceiling of a payload however it arrives; the
	// API's http.max_payload_bytes (default 256 KiB) may only lower it.
	// Rendered payloads are held to http.max_payload_bytes as well.
	MaxPayloadBytes = 1 << 20

	// MaxReasonLen bounds an operator's pause reason.
	MaxReasonLen = 1024

	// MaxErrorLen bounds last_error and an attempt's error text: a longer
	// provider message is cut (on a UTF-8 boundary) and marked.
	MaxErrorLen = 4096
	// MaxProviderCodeLen bounds an attempt's provider code.
	MaxProviderCodeLen = 256
	// MaxResultBytes bounds a provider's result (the Voyage plugin's own
	// default result cap). A larger one is not stored: result then holds a
	// note saying so, and the verdict stands.
	MaxResultBytes = 4 << 20
)
