-- Dashboard sessions, so that signing out ends a session on every API process at once: the
-- browser's cookie carries a random token, this table its SHA-256 (a copy of the table gives
-- nobody a session). A session belongs to the API key that signed in (NULL without keys,
-- --insecure-no-auth) and lasts while that key is not revoked, until expires_at. Sign-out deletes
-- the row; sign-in prunes expired rows through the expiry index.
CREATE TABLE dashboard_sessions (
    session_hash  text        PRIMARY KEY,
    key_id        text        REFERENCES api_keys (key_id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_expires ON dashboard_sessions (expires_at);
