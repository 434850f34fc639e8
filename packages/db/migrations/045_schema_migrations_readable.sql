-- Every process checks at startup that the migrations it needs are applied (packages/db
-- check-schema-version.ts), as its login user and before SET ROLE: the version list is
-- readable by all, and holds nothing but migration file names.
GRANT SELECT ON public.schema_migrations TO PUBLIC;
