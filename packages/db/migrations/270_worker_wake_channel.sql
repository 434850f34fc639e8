-- Each worker's own wake-up channel. A created task's notification went to one channel every
-- worker LISTENs on, and each worker parsed it to learn whether the workers' agreement
-- (rendezvous hashing of the task id over the live workers of its queue) chose it: with N
-- workers, N processes woke per task to run one. The creating gateway makes the same choice
-- now, over the same rows, and notifies the chosen worker's channel. A worker announces its
-- channel here; a worker of a release before this migration announces none (NULL), and a
-- task it is chosen for is announced on the shared channel as before, where it hears it.
ALTER TABLE app.workers ADD COLUMN IF NOT EXISTS wake_channel text;
