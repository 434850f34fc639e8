-- The retention purge found its rows by `ended_at + ttl_ms * interval '1 millisecond' <=
-- now()`, an expression no index can serve (timestamptz + interval is only STABLE): every
-- sweep read the whole of app.tasks, so its cost grew with the tasks retained, not with the
-- ones it removes. purge_at holds that instant, kept by a trigger wherever ended_at or
-- ttl_ms is written (so a release that predates the column keeps it right during a rolling
-- upgrade), and an index on it leaves the sweep only the expired rows to read.
ALTER TABLE app.tasks ADD COLUMN purge_at timestamptz;

CREATE FUNCTION app.tasks_purge_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.purge_at := NEW.ended_at + NEW.ttl_ms * interval '1 millisecond';
  RETURN NEW;
END $$;
CREATE TRIGGER tasks_purge_at BEFORE INSERT OR UPDATE OF ended_at, ttl_ms ON app.tasks
  FOR EACH ROW EXECUTE FUNCTION app.tasks_purge_at();

UPDATE app.tasks SET purge_at = ended_at + ttl_ms * interval '1 millisecond'
 WHERE ended_at IS NOT NULL;

CREATE INDEX tasks_purge_at ON app.tasks (purge_at) WHERE purge_at IS NOT NULL;
