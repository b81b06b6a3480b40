-- shoe-controller archive, migration 3: supervisors' corrections of settled
-- coups (coup.corrected).
--
-- One row per coup.corrected: the corrected result with coup.result's
-- fields (as in coups), the event_id of the result it supersedes (a
-- coup.result, or an earlier coup.corrected of the same coup), the cards it
-- changed ([{"position", "was", "card"}]), the supervisor's reason and the
-- command's id. The coups row it supersedes is kept as it was archived: a
-- coup's result in force is its latest correction if any, else its
-- coups row (controller/floor_stats.py reads it so).
--
-- Partitioned by month on ts like coups (partitions.py makes them); this
-- migration makes the months coups already has, so an archive migrated in
-- place takes a correction of any coup it holds.

SET LOCAL timezone = 'UTC';

CREATE TABLE coup_corrections (
    event_id     text        NOT NULL,
    ts           timestamptz NOT NULL,
    table_id     text        NOT NULL,
    shoe         text,
    seq          bigint      NOT NULL,
    coup         integer     NOT NULL,
    supersedes   text        NOT NULL,
    player_cards text[]      NOT NULL,
    banker_cards text[]      NOT NULL,
    player_total smallint    NOT NULL,
    banker_total smallint    NOT NULL,
    winner       text        NOT NULL CHECK (winner IN ('player', 'banker', 'tie')),
    "natural"    boolean     NOT NULL,
    player_pair  boolean     NOT NULL,
    banker_pair  boolean     NOT NULL,
    tags         text[]      NOT NULL DEFAULT '{}',
    settlement   jsonb       NOT NULL,           -- net per unit staked, by bet
    changes      jsonb       NOT NULL,           -- [{"position", "was", "card"}]
    reason       text        NOT NULL,
    command_id   text        NOT NULL,
    PRIMARY KEY (event_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX coup_corrections_table_shoe ON coup_corrections (table_id, shoe, coup, seq);
CREATE INDEX coup_corrections_table_ts ON coup_corrections (table_id, ts);

DO $$
DECLARE
    part record;
    month date;
BEGIN
    FOR part IN
        SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'coups'::regclass AND c.relname ~ '_p[0-9]{6}$'
    LOOP
        month := to_date(right(part.relname, 6), 'YYYYMM');
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF coup_corrections FOR VALUES FROM (%L) TO (%L)',
            'coup_corrections_p' || right(part.relname, 6),
            month::text || ' 00:00:00+00',
            (month + interval '1 month')::date::text || ' 00:00:00+00'
        );
    END LOOP;
END
$$;
