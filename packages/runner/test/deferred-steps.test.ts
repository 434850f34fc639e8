import type { Boundary, CompletedStep } from '@mtg/tasks';
import { deferredSteps, type DeferredStep } from '../src/deferred-steps.ts';

// The queue of a run's steps waiting for their journal (deferred-steps.ts), with writes that
// record their order: which steps a flush, the event loop's turn or a taker gets.
const step = (name: string): DeferredStep => ({
  step: { name } as CompletedStep,
  write: async () => ({ mine: true }) as Boundary,
});
const turn = () => new Promise((resolve) => setImmediate(resolve));

function recorder(fail?: (name: string) => boolean) {
  const written: string[] = [];
  const queue = deferredSteps(async (d) => {
    await turn();
    if (fail?.(d.step.name)) throw new Error(`write of ${d.step.name} failed`);
    written.push(d.step.name);
  });
  return { written, queue };
}

test('a flush writes every waiting step in the order they finished, and none is left to take', async () => {
  const { written, queue } = recorder();
  queue.defer(step('a'));
  queue.defer(step('b'));
  expect(queue.take()).toBeUndefined();
  await queue.flush();
  expect(written).toEqual(['a', 'b']);
  expect(queue.take()).toBeUndefined();
});

test('the one waiting step can be taken: then nothing writes it', async () => {
  const { written, queue } = recorder();
  queue.defer(step('last'));
  expect(queue.take()?.step.name).toBe('last');
  await turn();
  await queue.flush();
  expect(written).toEqual([]);
});

test("a step nobody takes or flushes is written in the event loop's next turn", async () => {
  const { written, queue } = recorder();
  queue.defer(step('a'));
  await turn();
  await turn();
  expect(written).toEqual(['a']);
  // A step finishing while that write is in flight is written after it.
  queue.defer(step('b'));
  await queue.flush();
  expect(written).toEqual(['a', 'b']);
  queue.close();
});

test('a failed write no flush waited for is reported by the next flush, once', async () => {
  const { written, queue } = recorder((name) => name === 'a');
  queue.defer(step('a'));
  await turn();
  await turn();
  await turn();
  await expect(queue.flush()).rejects.toThrow('write of a failed');
  await queue.flush();
  queue.defer(step('b'));
  await queue.flush();
  expect(written).toEqual(['b']);
});

test('a failed write a flush waited for is that flush’s error only', async () => {
  const { queue } = recorder((name) => name === 'a');
  queue.defer(step('a'));
  await expect(queue.flush()).rejects.toThrow('write of a failed');
  await expect(queue.flush()).resolves.toBeUndefined();
});
