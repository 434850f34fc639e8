// Chaos (b): the gateway process restarts (SIGTERM, then SIGKILL) while clients poll their
// tasks. Clients ride it out with plain retries; the tasks go on in the workers meanwhile.
import { startTask } from '../../scripts/bench/lib/mcp.ts';
import { pollToEnd, sleep } from './support/clients.ts';
import { chaosDescribe } from './support/gate.ts';
import { chaosStack } from './support/stack.ts';
import { batchesOf, checkIntegrity, expectIntact } from './support/integrity.ts';

chaosDescribe('gateway restarts', () => {
  const chaos = chaosStack({
    workers: 2,
    env: { DEMO_STEP_MS: '200' },
  });

  test('clients polling through a graceful and a hard gateway restart see every task to completion, never a 5xx', async () => {
    const tokens = await Promise.all(
      Array.from({ length: 4 }, (_, i) => chaos.stack.token(`poller-${i}`, 'restart')),
    );
    const expected = new Map<string, number>();
    const owners = new Map<string, string>();
    for (let i = 0; i < 12; i++) {
      const count = 5000; // 10 batches: a couple of seconds of work
      const token = tokens[i % tokens.length]!;
      const id = await startTask(chaos.stack.mcpUrl, token, 'bulk_update_records', {
        collection: `restart-${i}`,
        count,
        patch: { i },
      });
      expected.set(id, batchesOf(count));
      owners.set(id, token);
    }
    const polling = [...owners].map(([id, token]) =>
      pollToEnd(() => chaos.stack.mcpUrl, token, id, { everyMs: 50 }),
    );

    const restarts: Array<{ how: string; downMs: number; exit: string }> = [];
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      await sleep(700);
      const gateway = chaos.stack.gateways[0]!;
      const t0 = Date.now();
      if (signal === 'SIGTERM') await gateway.stop();
      else {
        gateway.kill('SIGKILL');
        await gateway.exited;
      }
      const exit = await gateway.exited;
      await chaos.stack.startGateway(0);
      restarts.push({ how: signal, downMs: Date.now() - t0, exit: `${exit.signal ?? exit.code}` });
    }
    const logs = await Promise.all(polling);

    const network = logs.reduce((a, l) => a + l.networkErrors.length, 0);
    process.stderr.write(
      `chaos (b): restarts ${restarts.map((r) => `${r.how} (exit ${r.exit}, down ${r.downMs} ms)`).join(', ')}; ` +
        `${logs.reduce((a, l) => a + l.polls, 0)} polls, ${network} refused/reset while down, ` +
        `${logs.reduce((a, l) => a + l.serverErrors.length, 0)} 5xx, ${logs.reduce((a, l) => a + l.rpcErrors.length, 0)} JSON-RPC errors\n`,
    );
    expect(restarts[0]!.exit).toBe('0'); // SIGTERM: drained and exited cleanly
    expect(logs.map((l) => l.finalStatus)).toEqual(logs.map(() => 'completed'));
    expect(logs.flatMap((l) => l.serverErrors)).toEqual([]);
    expect(logs.flatMap((l) => l.rpcErrors)).toEqual([]);
    expect(network).toBeGreaterThan(0); // the restarts really happened under the clients
    expectIntact('chaos (b)', await checkIntegrity(chaos.db.url, expected));
  }, 180_000);
});
