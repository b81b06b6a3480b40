-- The last batch each archiver committed, written in the batch's own
-- transaction. When a COMMIT succeeds but its reply is lost (the
-- connection drops at that moment), the archiver cannot know whether the
-- batch is in; it retries the same batch, and its first step on a retry is
-- to look here: the batch's mark means it is committed, so nothing is
-- written or counted twice (received, duplicates, ignored, rejects). A
-- batch PostgreSQL refused and that was then written message by message
-- marks each message as part 1..n, so a retry resumes after the last one
-- committed. One row per archiver: an archiver has one batch in flight.
CREATE TABLE archive_batch_marks (
    archiver  text        PRIMARY KEY,
    batch     uuid        NOT NULL,
    part      integer     NOT NULL,             -- 0: the whole batch; k > 0: its first k messages, one by one
    marked_at timestamptz NOT NULL DEFAULT now()
);
