-- What a parked task waits for from a person: a question to its caller (ctx.ask, form-mode
-- elicitation) or a second principal's approval (ctx.approval). One row per ask, keyed like a
-- journal step (`ask:1`, `approval:1`): the answer is journaled under the same name in
-- app.task_steps, in the transaction that records it, so a resumed run never asks again.
CREATE TABLE app.task_inputs (
  task_id      text NOT NULL REFERENCES app.tasks (id) ON DELETE CASCADE,
  key          text NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('input', 'approval')),
  message      text NOT NULL,
  -- input: the flat form schema the answer must satisfy; approval: {}.
  schema       jsonb NOT NULL,
  -- input: may the answer's free text be kept in the audit trail (the tool says so).
  keep_answer  boolean NOT NULL DEFAULT false,
  -- approval: the scope an approver must hold, and the tool's summary for the approver.
  scope        text,
  summary      jsonb,
  requested_at timestamptz NOT NULL DEFAULT now(),
  answered_at  timestamptz,
  -- Who answered: { subject, client } (the owner for input, the approver for approval).
  answered_by  jsonb,
  PRIMARY KEY (task_id, key)
);

-- Approvers list the open approvals of their tenant.
CREATE INDEX task_inputs_open ON app.task_inputs (kind, requested_at)
  WHERE answered_at IS NULL;

GRANT SELECT, INSERT, UPDATE ON app.task_inputs TO mtg_gateway, mtg_worker;
-- The gateway journals an answer as the step it is (the worker journals every other step).
GRANT INSERT ON app.task_steps TO mtg_gateway;
