-- The progress token of a 2025-11-25 task-augmented tools/call (its `_meta.progressToken`),
-- which stays valid for the task's lifetime: the gateway sends notifications/progress with
-- it on the task's tasks/result streams. A repeat of the call that joins the live task brings
-- its caller's token, which replaces this one. `notified`: the last progress value sent with
-- the token, so that each notification for it goes up (the protocol's rule), whichever
-- stream on whichever gateway replica sends it.
CREATE TABLE app.task_progress_tokens (
  task_id  text PRIMARY KEY REFERENCES app.tasks (id) ON DELETE CASCADE,
  token    jsonb NOT NULL,
  notified double precision
);

GRANT SELECT, INSERT, UPDATE ON app.task_progress_tokens TO mtg_gateway;
