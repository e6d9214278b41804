-- +goose Up
-- Text columns bounded by the database itself (docs/design.md §10). Every
-- door notifyd keeps (the API, EnqueueTx, schedules, provider verdicts) holds
-- these values to their bounds, but an application may write the outbox with
-- its own SQL, and what it wrote was read back whole: a QUEUED row with a
-- 300 MB recipient cost every claim of its batch 300-600 MB, a FAILED row's
-- 1 GB last_error every dead-letter page, the dead-letter hook and every GET
-- of it, and a channel past a btree entry's 2,704 bytes failed every count
-- compaction (notification_counts' key) for good. A CHECK makes the bound
-- hold for every writer: such an INSERT now fails, naming the constraint.
--
--   notifications.channel          200 bytes   (wire.MaxChannelLen)
--   notifications.recipient        1,024       (wire.MaxRecipientLen)
--   notifications.idempotency_key  2,048       (the API's and EnqueueTx's
--        512, wire.MaxIdempotencyKeyLen; a schedule's keys are a prefix of
--        up to ~300 bytes and a recipient: 2,048 fits both and a btree entry)
--   notifications.last_error       4,096       (wire.MaxErrorLen)
--   notification_attempts.error    4,096; provider_code 256
--   channel_controls.channel 200; reason 1,024 (wire.MaxReasonLen)
--   subscribers.external_id 256; topic_subscriptions.topic 200
--
-- Rows already past a bound are finished first, never dropped: a row still
-- to be sent whose channel, recipient or key is past its bound is FAILED
-- with the reason (it could not have been sent: the plugin's message would
-- have held the same value), and every value past its bound is cut — a
-- channel to 50 characters and a mark no configured channel can match, a
-- recipient to 256 characters, a key to "sha256:" and the hash of the whole
-- (still unique), an error to 1,000 characters and a mark. Counts for a
-- channel that no row has any more are dropped. octet_length reads a long
-- value's size from its header, so the scan reads no value whole; on
-- 10,000,000 settled rows (and their attempts) this migration took 8.7-9.8 s,
-- holding off writers meanwhile (ADD CONSTRAINT validates under its lock).
UPDATE notifications n
   SET status = CASE WHEN b.unsendable THEN 'FAILED' ELSE n.status END,
       next_attempt_at = CASE WHEN b.unsendable THEN NULL ELSE n.next_attempt_at END,
       last_error = CASE WHEN b.unsendable
                         THEN 'FAILED by migration 00015: ' || concat_ws(', ',
                                  CASE WHEN octet_length(n.channel) > 200
                                       THEN 'its channel is ' || octet_length(n.channel) || ' bytes long, at most 200' END,
                                  CASE WHEN octet_length(n.recipient) > 1024
                                       THEN 'its recipient is ' || octet_length(n.recipient) || ' bytes long, at most 1024' END,
                                  CASE WHEN octet_length(n.idempotency_key) > 2048
                                       THEN 'its idempotency_key is ' || octet_length(n.idempotency_key) || ' bytes long, at most 2048' END)
                              || ' (written past the API''s checks; stored cut)'
                         WHEN octet_length(n.last_error) > 4096 THEN left(n.last_error, 1000) || ' …[truncated]'
                         ELSE n.last_error END,
       channel = CASE WHEN octet_length(n.channel) > 200 THEN left(n.channel, 50) || '…[cut]' ELSE n.channel END,
       recipient = CASE WHEN octet_length(n.recipient) > 1024 THEN left(n.recipient, 256) ELSE n.recipient END,
       idempotency_key = CASE WHEN octet_length(n.idempotency_key) > 2048
                              THEN 'sha256:' || encode(sha256(convert_to(n.idempotency_key, 'UTF8')), 'hex')
                              ELSE n.idempotency_key END,
       updated_at = now()
  FROM (SELECT id,
               status IN ('PENDING', 'QUEUED', 'PROCESSING')
               AND (octet_length(channel) > 200 OR octet_length(recipient) > 1024
                    OR octet_length(idempotency_key) > 2048) IS TRUE AS unsendable
          FROM notifications
         WHERE octet_length(channel) > 200 OR octet_length(recipient) > 1024
            OR octet_length(idempotency_key) > 2048 OR octet_length(last_error) > 4096) b
 WHERE n.id = b.id;

-- The update's own count deltas moved those rows off their long channels:
-- no row has one now, so neither may a count.
DELETE FROM notification_count_deltas WHERE octet_length(channel) > 200;
DELETE FROM notification_counts WHERE octet_length(channel) > 200;

UPDATE notification_attempts
   SET error = CASE WHEN octet_length(error) > 4096 THEN left(error, 1000) || ' …[truncated]' ELSE error END,
       provider_code = CASE WHEN octet_length(provider_code) > 256 THEN left(provider_code, 50) || '…' ELSE provider_code END
 WHERE octet_length(error) > 4096 OR octet_length(provider_code) > 256;

UPDATE channel_controls SET reason = left(reason, 250) || '…' WHERE octet_length(reason) > 1024;
DELETE FROM channel_controls WHERE octet_length(channel) > 200; -- no configured channel is that long

ALTER TABLE notifications
    ADD CONSTRAINT notifications_channel_bound CHECK (octet_length(channel) <= 200),
    ADD CONSTRAINT notifications_recipient_bound CHECK (octet_length(recipient) <= 1024),
    ADD CONSTRAINT notifications_idempotency_key_bound CHECK (octet_length(idempotency_key) <= 2048),
    ADD CONSTRAINT notifications_last_error_bound CHECK (octet_length(last_error) <= 4096);
ALTER TABLE notification_attempts
    ADD CONSTRAINT notification_attempts_error_bound CHECK (octet_length(error) <= 4096),
    ADD CONSTRAINT notification_attempts_provider_code_bound CHECK (octet_length(provider_code) <= 256);
ALTER TABLE channel_controls
    ADD CONSTRAINT channel_controls_channel_bound CHECK (octet_length(channel) <= 200),
    ADD CONSTRAINT channel_controls_reason_bound CHECK (octet_length(reason) <= 1024);

-- Subscribers are the other table an application may fill with its own SQL
-- (an import). Their keys are unique, so a row past the bound cannot be cut
-- without a collision check; such rows are left for the operator, and the
-- constraints hold for every row written from now on (NOT VALID: checked on
-- insert and update, not against what is already there).
ALTER TABLE subscribers
    ADD CONSTRAINT subscribers_external_id_bound CHECK (octet_length(external_id) <= 256) NOT VALID;
ALTER TABLE topic_subscriptions
    ADD CONSTRAINT topic_subscriptions_topic_bound CHECK (octet_length(topic) <= 200) NOT VALID;

-- +goose Down
ALTER TABLE topic_subscriptions DROP CONSTRAINT topic_subscriptions_topic_bound;
ALTER TABLE subscribers DROP CONSTRAINT subscribers_external_id_bound;
ALTER TABLE channel_controls
    DROP CONSTRAINT channel_controls_reason_bound,
    DROP CONSTRAINT channel_controls_channel_bound;
ALTER TABLE notification_attempts
    DROP CONSTRAINT notification_attempts_provider_code_bound,
    DROP CONSTRAINT notification_attempts_error_bound;
ALTER TABLE notifications
    DROP CONSTRAINT notifications_last_error_bound,
    DROP CONSTRAINT notifications_idempotency_key_bound,
    DROP CONSTRAINT notifications_recipient_bound,
    DROP CONSTRAINT notifications_channel_bound;
