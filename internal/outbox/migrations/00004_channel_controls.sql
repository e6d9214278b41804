-- +goose Up
-- Operator controls per channel. Kept in Postgres, not Redis, so a paused
-- channel stays paused when Redis loses its data.
CREATE TABLE channel_controls (
    channel    text        PRIMARY KEY,
    paused     boolean     NOT NULL DEFAULT false,
    reason     text,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE channel_controls;
