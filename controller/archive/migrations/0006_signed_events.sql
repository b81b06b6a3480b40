-- shoe-controller archive, migration 6: signed and chained events.
--
-- signed_lines: a signed event's line exactly as received, beside its
-- events row: its bytes are what the signature covers and what the next
-- event's prev digests (jsonb keeps neither the key order nor the number
-- spelling), so `shoe-controller verify --dsn` can check the archive long
-- after, and that each events row still holds what was signed. Written in
-- the same transaction as the events row; retention deletes it by ts with
-- event_ids. Only live events: replayed ones are never signed.
--
-- table_keys: each table's public keys, as the archiver trusts them:
-- 'pinned' (the archive config's signing.keys), 'tofu' (the first key a
-- table announced on <prefix>/<table>/keys: trusted on first use) or
-- 'endorsed' (a later key, signed by a key already trusted: a rotation).
-- A table with a row here signs: its unsigned or badly signed events are
-- kept aside in rejects.

SET LOCAL timezone = 'UTC';

CREATE TABLE signed_lines (
    event_id text        PRIMARY KEY,
    ts       timestamptz NOT NULL,
    table_id text        NOT NULL,
    seq      bigint      NOT NULL,
    line     text        NOT NULL
);
CREATE INDEX signed_lines_table_seq ON signed_lines (table_id, seq);
CREATE INDEX signed_lines_ts ON signed_lines (ts);

CREATE TABLE table_keys (
    table_id    text        NOT NULL,
    key_id      text        NOT NULL,
    public_key  text        NOT NULL,
    trust       text        NOT NULL CHECK (trust IN ('pinned', 'tofu', 'endorsed')),
    endorsed_by text,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, key_id)
);
