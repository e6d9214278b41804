-- The application's own tables (not notifyd's): who takes the quiz, and one
-- quiz per day. notifyd only reads them, through the schedule's audience
-- query in notifyd.yaml.
CREATE TABLE IF NOT EXISTS users (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name      text,
    phone     text NOT NULL,
    opted_in  boolean NOT NULL DEFAULT false
);

CREATE TABLE IF NOT EXISTS quizzes (
    day      date PRIMARY KEY,          -- the day in Asia/Seoul it is sent
    question text NOT NULL,
    choices  text[] NOT NULL
);
