-- +goose Up
-- UNKNOWN: an attempt whose outcome was lost with the instance that made it
-- (killed while it sent). Claim records it when it takes the row over from
-- its stale claim (internal/outbox/claim.go), so a notification's attempts and
-- its history always agree.
ALTER TABLE notification_attempts DROP CONSTRAINT notification_attempts_outcome_check;
ALTER TABLE notification_attempts ADD CONSTRAINT notification_attempts_outcome_check
    CHECK (outcome IN ('SUCCESS', 'TRANSIENT', 'PERMANENT', 'UNKNOWN'));

-- +goose Down
DELETE FROM notification_attempts WHERE outcome = 'UNKNOWN';
ALTER TABLE notification_attempts DROP CONSTRAINT notification_attempts_outcome_check;
ALTER TABLE notification_attempts ADD CONSTRAINT notification_attempts_outcome_check
    CHECK (outcome IN ('SUCCESS', 'TRANSIENT', 'PERMANENT'));
