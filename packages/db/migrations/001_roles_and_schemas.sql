-- Application roles: NOLOGIN groups, granted to one LOGIN role per process kind (the
-- launcher, `npm run migrate` and the tests create those; docs/operations.md).
-- Roles are cluster-wide, so several databases on one server (tests) may race to create
-- them: tolerate the duplicate.
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['mtg_gateway', 'mtg_worker', 'mtg_auditor', 'mtg_downstream'] LOOP
    BEGIN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r);
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
  END LOOP;
END $$;

-- Nobody but the owner creates objects in public.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- The product's own state (tasks, steps, results, principals).
CREATE SCHEMA app;
GRANT USAGE ON SCHEMA app TO mtg_gateway, mtg_worker;

-- The audit trail. Application roles reach it only through the writer function and, for
-- the auditor, through views (see the audit migrations).
CREATE SCHEMA audit;
GRANT USAGE ON SCHEMA audit TO mtg_gateway, mtg_worker, mtg_auditor;

-- The demo downstream system keeps its records apart from the gateway's.
CREATE SCHEMA downstream;
GRANT USAGE ON SCHEMA downstream TO mtg_downstream;
