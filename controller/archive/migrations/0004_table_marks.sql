-- shoe-controller archive, migration 4: how far the archive holds each
-- table's events without a hole (end-to-end acknowledgement).
--
-- One row per table: every event of the table with a seq from the first
-- one archived (first_seq) up to seq is in events, except the seqs of a
-- new epoch's jump (a JOURNAL_LOST alert's gap, closed once it has stayed
-- open long enough for the table to re-offer what its journal still held).
-- event_id is that of the event at seq: the table checks it against its
-- own journal, so a mark made from another journal's events (a table
-- name reused with a fresh journal) is not taken as its own. The archiver
-- moves a row only forward (GREATEST), after its batch committed, and
-- publishes it, retained, on <prefix>/<table>/archive/mark
-- (controller/archive/marks.py).
CREATE TABLE archive_table_marks (
    table_id   text        PRIMARY KEY,
    first_seq  bigint      NOT NULL,
    seq        bigint      NOT NULL,
    event_id   text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
