-- Session cache invalidation (issue 11, docs/decisions.md, "Performance"): every process may keep the sessions it
-- verified for a few seconds; whatever ends a session or changes what it may do is announced on
-- the channel "dimensio_sessions", by the database itself, so that direct SQL, the import CLI and
-- every process of the service are covered alike. Payloads: "s:<SESSION_ID>" (that session) and
-- "u:<USER_ID>" (every session of that user). Activity marks are announced too: they are written
-- at most every 30 s per session, and a process must not judge idleness on an older mark.

CREATE OR REPLACE FUNCTION "dimensio_session_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('dimensio_sessions', 's:' || OLD."SESSION_ID");
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION "dimensio_user_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('dimensio_sessions', 'u:' || OLD."USER_ID");
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF TG_OP = 'INSERT' OR NEW."USER_ID" IS DISTINCT FROM OLD."USER_ID" THEN
      PERFORM pg_notify('dimensio_sessions', 'u:' || NEW."USER_ID");
    END IF;
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS "TB_ANAG_SESSIONS00_notify" ON "TB_ANAG_SESSIONS00";
CREATE TRIGGER "TB_ANAG_SESSIONS00_notify"
  AFTER DELETE OR UPDATE ON "TB_ANAG_SESSIONS00" FOR EACH ROW EXECUTE FUNCTION "dimensio_session_changed"();

DROP TRIGGER IF EXISTS "TB_USER_notify" ON "TB_USER";
CREATE TRIGGER "TB_USER_notify"
  AFTER DELETE OR UPDATE OF "USER_ID", "TENANT_ID", "PESO", "CENTRO_DETT", "AMBIENTE", "LINGUA", "ACTIVE"
  ON "TB_USER" FOR EACH ROW EXECUTE FUNCTION "dimensio_user_changed"();

DROP TRIGGER IF EXISTS "TB_USER_GRANT_notify" ON "TB_USER_GRANT";
CREATE TRIGGER "TB_USER_GRANT_notify"
  AFTER INSERT OR DELETE OR UPDATE
  ON "TB_USER_GRANT" FOR EACH ROW EXECUTE FUNCTION "dimensio_user_changed"();
