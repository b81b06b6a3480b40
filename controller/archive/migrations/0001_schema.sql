-- shoe-controller archive, migration 1: the floor archive's schema.
--
-- Applied once, in a transaction, by `shoe-controller archive --migrate`
-- (controller/archive/migrate.py records it in schema_migrations). A
-- committed migration is never edited: a change is a new, higher-numbered file.
--
-- Time partitioning: every table that grows with play (events, coups,
-- misdeals, device_status, security_alerts) is partitioned by month on the
-- event's own ts (RANGE, [first of month, first of next month) UTC). The
-- partitions (<parent>_pYYYYMM) are made by the archiver (partitions.py),
-- ahead of time and on demand; retention drops whole partitions.
--
-- Idempotency: a unique constraint on a partitioned table must include the
-- partition key, so (event_id, ts) could not stop the same event_id arriving
-- with a different ts. event_ids is therefore a plain (non-partitioned)
-- table with event_id as its primary key and the SHA-256 of the event's
-- canonical JSON: the one place that says "this id is archived, with this
-- content". An insert there decides new / duplicate / conflict; the
-- partitioned rows are written only for new ids, in the same transaction.

SET LOCAL timezone = 'UTC';

CREATE TABLE event_ids (
    event_id    text        PRIMARY KEY,
    ts          timestamptz NOT NULL,
    table_id    text        NOT NULL,
    digest      bytea       NOT NULL,           -- sha256 of the canonical JSON
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_ids_ts ON event_ids (ts);   -- retention deletes by ts

-- Every archived event, as received (the raw JSON beside the typed rows).
CREATE TABLE events (
    event_id    text        NOT NULL,
    ts          timestamptz NOT NULL,
    table_id    text        NOT NULL,
    shoe        text,
    seq         bigint      NOT NULL,
    type        text        NOT NULL,
    payload     jsonb       NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX events_table_ts ON events (table_id, ts);
CREATE INDEX events_table_seq ON events (table_id, seq);
CREATE INDEX events_type_ts ON events (type, ts);

-- One row per coup.result and per coup.void (a void coup is never settled:
-- winner, totals and settlement are NULL, void_code says why).
CREATE TABLE coups (
    event_id     text        NOT NULL,
    ts           timestamptz NOT NULL,
    table_id     text        NOT NULL,
    shoe         text,
    seq          bigint      NOT NULL,
    coup         integer     NOT NULL,
    demo         boolean     NOT NULL DEFAULT false,
    void         boolean     NOT NULL,
    void_code    text,
    player_cards text[],
    banker_cards text[],
    player_total smallint,
    banker_total smallint,
    winner       text CHECK (winner IN ('player', 'banker', 'tie')),
    "natural"    boolean,
    player_pair  boolean,
    banker_pair  boolean,
    tags         text[]      NOT NULL DEFAULT '{}',
    settlement   jsonb,                          -- net per unit staked, by bet
    corrections  text[]      NOT NULL DEFAULT '{}',
    PRIMARY KEY (event_id, ts),
    CHECK (void = (void_code IS NOT NULL)),
    CHECK (void OR winner IS NOT NULL)
) PARTITION BY RANGE (ts);
CREATE INDEX coups_table_ts ON coups (table_id, ts);
CREATE INDEX coups_ts ON coups (ts);
CREATE INDEX coups_table_shoe ON coups (table_id, shoe, coup);

CREATE TABLE misdeals (
    event_id   text        NOT NULL,
    ts         timestamptz NOT NULL,
    table_id   text        NOT NULL,
    shoe       text,
    seq        bigint      NOT NULL,
    coup       integer,
    code       text        NOT NULL,
    detail     text        NOT NULL DEFAULT '',
    action     text        NOT NULL,             -- corrected | awaiting_supervisor | void
    deadline   timestamptz,
    supervisor boolean     NOT NULL DEFAULT false, -- a supervisor's command made this (intervention)
    PRIMARY KEY (event_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX misdeals_table_ts ON misdeals (table_id, ts);
CREATE INDEX misdeals_code_ts ON misdeals (code, ts);

CREATE TABLE device_status (
    event_id text        NOT NULL,
    ts       timestamptz NOT NULL,
    table_id text        NOT NULL,
    shoe     text,
    seq      bigint      NOT NULL,
    state    text        NOT NULL,               -- online | offline | fault
    code     text,
    device   jsonb,                              -- model, firmware, serial
    PRIMARY KEY (event_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX device_status_table_ts ON device_status (table_id, ts);

CREATE TABLE security_alerts (
    event_id   text        NOT NULL,
    ts         timestamptz NOT NULL,
    table_id   text        NOT NULL,
    shoe       text,
    seq        bigint      NOT NULL,
    coup       integer,
    code       text        NOT NULL,
    detail     text        NOT NULL DEFAULT '',
    supervisor boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (event_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX security_alerts_table_ts ON security_alerts (table_id, ts);
CREATE INDEX security_alerts_code_ts ON security_alerts (code, ts);

-- A supervisor's interventions as the events show them: a misdeal corrected
-- or voided by a command (enter_card, accept, void), the coup numbering
-- restored by accept. (Commands themselves are not events; their effects are.)
CREATE VIEW supervisor_interventions AS
    SELECT event_id, ts, table_id, shoe, seq, coup, 'misdeal' AS kind, code, detail, action
      FROM misdeals WHERE supervisor
    UNION ALL
    SELECT event_id, ts, table_id, shoe, seq, coup, 'security.alert', code, detail, NULL
      FROM security_alerts WHERE supervisor;

-- One row per shoe: shoe.started fills the first half, shoe.ended the rest
-- (either may arrive first). Small (a row per shoe), not partitioned;
-- retention deletes shoes started before the horizon.
CREATE TABLE shoes (
    table_id         text        NOT NULL,
    shoe             text        NOT NULL,
    started_at       timestamptz,
    started_event_id text,
    decks            smallint,
    profile          text,
    shuffle_commit   text,
    ended_at         timestamptz,
    ended_event_id   text,
    coups            integer,
    cards_dealt      integer,
    tally_player     integer,
    tally_banker     integer,
    tally_tie        integer,
    PRIMARY KEY (table_id, shoe)
);
CREATE INDEX shoes_started ON shoes (started_at);

-- The same event_id arrived with different content: both kept, never
-- overwritten. Every row is an integrity alert (the archiver also logs it
-- and counts it in archive_counters 'conflicts'). Not subject to retention.
CREATE TABLE conflicts (
    id             bigserial   PRIMARY KEY,
    event_id       text        NOT NULL,
    detected_at    timestamptz NOT NULL DEFAULT now(),
    archiver       text        NOT NULL,
    topic          text        NOT NULL,
    stored_digest  bytea       NOT NULL,
    new_digest     bytea       NOT NULL,
    stored_payload jsonb,                        -- NULL if its partition was dropped
    new_payload    jsonb       NOT NULL
);
CREATE INDEX conflicts_event_id ON conflicts (event_id);

-- A message that is not a valid event (bad JSON, oversized, wrong types,
-- outside the retention window): kept aside, counted, acknowledged.
CREATE TABLE rejects (
    id          bigserial   PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    archiver    text        NOT NULL,
    topic       text        NOT NULL,
    reason      text        NOT NULL,
    size        integer     NOT NULL,            -- the payload's full size in bytes
    payload     bytea       NOT NULL             -- at most the archiver's max_payload_bytes
);
CREATE INDEX rejects_received ON rejects (received_at);

-- Durable counters, written in the same transaction as the rows they count
-- (so they are exact across kill -9): received, archived, duplicates,
-- conflicts, rejects, per archiver (its MQTT client id).
CREATE TABLE archive_counters (
    archiver text   NOT NULL,
    name     text   NOT NULL,
    value    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (archiver, name)
);
