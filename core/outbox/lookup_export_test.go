package outbox

// ListByRecipientSQL lets the tests EXPLAIN the query ListByRecipient runs.
const ListByRecipientSQL = listByRecipient
