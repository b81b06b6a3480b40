-- shoe-controller archive, migration 5: replayed events kept apart.
--
-- An event that `shoe-controller replay --out mqtt` published says so in its
-- envelope (`"replay": {"run", "source"}`) and has an id of its own form,
-- replay/<run>/<table>/<shoe>/<seq>, that can never be a live table's. The
-- archiver stores such events here, in the schema `replays`, and never in
-- the live tables: a replay never claims a live event's id, never goes to
-- the live `conflicts`, and the floor's figures (`report`, which reads the
-- live tables) never count it. `report --replays` reads this schema instead
-- (its queries run with search_path = replays, so every table and view it
-- reads has its twin here, with the same columns).
--
-- The same tables as the live ones (LIKE: columns, defaults, checks,
-- indexes), not partitioned: replays are few, and retention deletes their
-- rows by ts (Store.maintain). A later migration that changes a live table
-- the store or report uses changes its twin here too.

SET LOCAL timezone = 'UTC';

CREATE SCHEMA replays;

CREATE TABLE replays.event_ids        (LIKE public.event_ids        INCLUDING ALL);
CREATE TABLE replays.events           (LIKE public.events           INCLUDING ALL);
CREATE TABLE replays.coups            (LIKE public.coups            INCLUDING ALL);
CREATE TABLE replays.misdeals         (LIKE public.misdeals         INCLUDING ALL);
CREATE TABLE replays.device_status    (LIKE public.device_status    INCLUDING ALL);
CREATE TABLE replays.security_alerts  (LIKE public.security_alerts  INCLUDING ALL);
CREATE TABLE replays.coup_corrections (LIKE public.coup_corrections INCLUDING ALL);
CREATE TABLE replays.shoes            (LIKE public.shoes            INCLUDING ALL);
CREATE TABLE replays.conflicts        (LIKE public.conflicts        INCLUDING ALL);

CREATE VIEW replays.supervisor_interventions AS
    SELECT event_id, ts, table_id, shoe, seq, coup, 'misdeal' AS kind, code, detail, action
      FROM replays.misdeals WHERE supervisor
    UNION ALL
    SELECT event_id, ts, table_id, shoe, seq, coup, 'security.alert', code, detail, NULL
      FROM replays.security_alerts WHERE supervisor;
