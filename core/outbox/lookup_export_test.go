package outbox

// ListByRecipientSQL lets the tests EXPLAIN the query ListByRecipient runs.
const ListByRecipientSQL = listByRecipient

// RelaySQL and RelayPlan let the tests EXPLAIN the relay as Relay runs it.
const (
	RelaySQL  = relaySQL
	RelayPlan = relayPlan
)
