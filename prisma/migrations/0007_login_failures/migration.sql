-- Login lockout per user and client address (issue 18 §4, docs/decisions.md "Login lockout per
-- client address"): failed logins are counted per (USER_ID, CLIENT_KEY), where CLIENT_KEY is the
-- client's IPv4 address or the /64 of its IPv6 address, so that failures from one address lock the
-- user there only. TB_USER.FAILED_LOGINS is no longer written; TB_USER.LOCKED_UNTIL stays an
-- operator's lock of the account from every address.
CREATE TABLE IF NOT EXISTS "TB_LOGIN_FAILURE" (
  "USER_ID"      VARCHAR(100)   NOT NULL REFERENCES "TB_USER" ("USER_ID") ON UPDATE CASCADE ON DELETE CASCADE,
  "CLIENT_KEY"   VARCHAR(64)    NOT NULL,
  "FAILURES"     INTEGER        NOT NULL DEFAULT 0,
  "LOCKED_UNTIL" TIMESTAMPTZ(3),
  "LAST_FAILURE" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  PRIMARY KEY ("USER_ID", "CLIENT_KEY")
);

-- Locks the per-user counter set before this migration are lifted: they locked out every address.
UPDATE "TB_USER" SET "FAILED_LOGINS" = 0, "LOCKED_UNTIL" = NULL
 WHERE "FAILED_LOGINS" <> 0 OR "LOCKED_UNTIL" IS NOT NULL;
