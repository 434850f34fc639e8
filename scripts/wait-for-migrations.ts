// A thin call of the CLI's command (apps/cli), kept so that `node scripts/wait-for-migrations.ts` still works.
import '../apps/cli/src/commands/wait-for-migrations.ts';
