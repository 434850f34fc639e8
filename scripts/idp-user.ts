// A thin call of the CLI's command (apps/cli), kept so that `node scripts/idp-user.ts` still works.
import '../apps/cli/src/commands/idp-user.ts';
