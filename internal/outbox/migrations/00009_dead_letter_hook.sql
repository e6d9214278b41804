-- +goose Up
-- Dead-letter hooks (internal/outbox/deadhook.go): a channel with
-- dead_letter_hook tells another channel of its dead letters, in batches.
--
-- dead_letter_hooks lists the channels that have one; every instance writes
-- its config's list at start. dead_letter_events is their outbox: a row per
-- notification that became FAILED on such a channel, written by the triggers
-- below in the same transaction as the transition, whichever path made it
-- (a final verdict, max_attempts, a hostile row failed at insert, a schedule's
-- unrenderable recipient, a replayed dead letter failing again). The hook
-- relay turns a batch of events into one notification on the hook channel and
-- deletes them, in one transaction, so each dead letter is told exactly once
-- into the outbox, and from there at least once.
--
-- Cost on the hot path: the triggers' WHEN conditions are checked in the
-- executor for each row an UPDATE of status or an INSERT touches; only a
-- FAILED row runs the function (docs/performance.md measures it).
CREATE TABLE dead_letter_hooks (
    channel text COLLATE "C" PRIMARY KEY
);

CREATE TABLE dead_letter_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel         text COLLATE "C" NOT NULL,
    notification_id bigint      NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letter_events_channel ON dead_letter_events (channel, id);

-- +goose StatementBegin
CREATE FUNCTION notifyd_dead_letter_event() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO dead_letter_events (channel, notification_id)
    SELECT NEW.channel, NEW.id WHERE EXISTS (SELECT 1 FROM dead_letter_hooks h WHERE h.channel = NEW.channel);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER notifications_dead_letter_update AFTER UPDATE OF status ON notifications
    FOR EACH ROW WHEN (NEW.status = 'FAILED' AND OLD.status <> 'FAILED')
    EXECUTE FUNCTION notifyd_dead_letter_event();
CREATE TRIGGER notifications_dead_letter_insert AFTER INSERT ON notifications
    FOR EACH ROW WHEN (NEW.status = 'FAILED')
    EXECUTE FUNCTION notifyd_dead_letter_event();

-- +goose Down
DROP TRIGGER notifications_dead_letter_insert ON notifications;
DROP TRIGGER notifications_dead_letter_update ON notifications;
DROP FUNCTION notifyd_dead_letter_event();
DROP TABLE dead_letter_events;
DROP TABLE dead_letter_hooks;
