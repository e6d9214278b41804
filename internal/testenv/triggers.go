package testenv

// RefuseHookPoisonSQL installs a trigger that refuses, with a plain RAISE
// EXCEPTION (SQLSTATE P0001, of no data class), every notification on the
// channel "oncall" whose payload mentions "poison": an operator's trigger
// refusing the dead-letter hook notification that lists such a dead letter.
const RefuseHookPoisonSQL = `
CREATE FUNCTION no_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.channel = 'oncall' AND position('poison' in NEW.payload::text) > 0 THEN
        RAISE EXCEPTION 'poisoned dead letter';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER no_poison BEFORE INSERT ON notifications FOR EACH ROW EXECUTE FUNCTION no_poison();`
