-- A session's delete is announced as "d:<SESSION_ID>", its other changes (activity marks, rebuilt
-- grants) stay "s:<SESSION_ID>" (migration 0006). With one payload for both, a logout waiting for
-- its delete's notice could not tell it from an activity mark of another process arriving late;
-- now it waits for the "d:" (src/auth/session-auth.ts, endSession). Listeners evict on both.

CREATE OR REPLACE FUNCTION "dimensio_session_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('dimensio_sessions', 'd:' || OLD."SESSION_ID");
  ELSE
    PERFORM pg_notify('dimensio_sessions', 's:' || OLD."SESSION_ID");
  END IF;
  RETURN NULL;
END $$;
