// A thin call of the CLI's command (apps/cli), kept so that `node scripts/audit-checkpoint.ts` still works.
import '../apps/cli/src/commands/audit-checkpoint.ts';
