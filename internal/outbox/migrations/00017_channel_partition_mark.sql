-- +goose Up
-- A channel's name holds no '#' (docs/design.md §3). A partitioned channel's
-- Redis queues are <name>#<k>, and a row's queue is its channel's name when
-- no channel of that name is configured; no configured channel's name can
-- hold '#' (wire.NameRE), so with '#' refused every channel's queues are its
-- own. An application's own SQL could write a row on "hooks#1": its id went
-- into the queue of hooks' partition 1, was fetched by hooks' workers and
-- sent through hooks' plugin, to a recipient and with a payload meant for
-- no such channel.
--
-- Rows still to be sent on such a channel are finished FAILED with the
-- reason: no configured channel can send them. They are found through the
-- partial indexes of the PENDING rows and of the in-flight ones (phase 0
-- and 1), so the walk costs the rows not yet settled, never the history.
-- Settled rows keep their channel; the CHECK is added NOT VALID (it scans
-- nothing) and holds for every row written or changed from now on, so such
-- a row can no longer be replayed into a queue either. The table is locked
-- first: no row can be written between the walk and the constraint.
LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE;

UPDATE notifications n
   SET status = 'FAILED', next_attempt_at = NULL, updated_at = now(),
       last_error = 'FAILED by migration 00017: its channel ' || left(n.channel, 200)
                    || ' holds ''#'', which no configured channel''s name can (a channel''s partitions are its Redis queues <name>#<k>), so no channel can send it'
                    || CASE WHEN n.status = 'PROCESSING'
                            THEN ' (it was PROCESSING: it may have been sent through the queue of the channel before the ''#'')'
                            ELSE '' END
 WHERE n.id IN (SELECT id FROM notifications WHERE phase = 0 AND strpos(channel, '#') > 0
                UNION ALL
                SELECT id FROM notifications WHERE phase = 1 AND strpos(channel, '#') > 0);

ALTER TABLE notifications
    ADD CONSTRAINT notifications_channel_no_partition_mark CHECK (strpos(channel, '#') = 0) NOT VALID;

-- +goose Down
ALTER TABLE notifications DROP CONSTRAINT notifications_channel_no_partition_mark;
