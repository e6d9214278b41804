-- +goose Up
-- The trace a notification was enqueued in (docs/design.md §11): the W3C
-- traceparent of the enqueuing span, continued by every delivery attempt.
-- NULL when tracing is off or the writer had no trace, so an untraced row
-- costs nothing. A nullable column without a default and a NOT VALID check
-- are catalog changes only: no table rewrite or scan under the lock.
ALTER TABLE notifications ADD COLUMN trace_parent text;
ALTER TABLE notifications ADD CONSTRAINT notifications_trace_parent_len
    CHECK (octet_length(trace_parent) <= 55) NOT VALID;

-- +goose Down
ALTER TABLE notifications DROP COLUMN trace_parent;
