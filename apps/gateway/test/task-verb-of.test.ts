import { expect, test } from '@jest/globals';
import { taskVerbOf } from '../src/http/require-task-scope.ts';

const id = 'a'.repeat(32);
const modern = (method: string, extension = true) => ({
  jsonrpc: '2.0',
  id: 1,
  method,
  params: {
    taskId: id,
    _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': extension
        ? { extensions: { 'io.modelcontextprotocol/tasks': {} } }
        : {},
    },
  },
});

test('names the task verb of each wire’s request for one task, as the handlers route it', () => {
  expect(taskVerbOf(modern('tasks/get'))).toEqual({ verb: 'get', taskId: id, wire: 'ext-2026' });
  expect(taskVerbOf(modern('tasks/update'))).toMatchObject({ verb: 'get' });
  expect(taskVerbOf(modern('tasks/cancel'))).toMatchObject({ verb: 'cancel' });
  const core = (method: string) => ({ jsonrpc: '2.0', id: 1, method, params: { taskId: id } });
  expect(taskVerbOf(core('tasks/result'))).toEqual({
    verb: 'result',
    taskId: id,
    wire: 'core-2025',
  });
  expect(taskVerbOf(core('tasks/cancel'))).toMatchObject({ verb: 'cancel' });
  const call = (name: string, args: unknown, extra = {}) => ({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name, arguments: args, ...extra },
  });
  expect(taskVerbOf(call('get_job_result', { jobId: id }))).toEqual({
    verb: 'result',
    taskId: id,
    wire: 'job-tools',
    jobTool: 'get_job_result',
  });
});

test('names nothing for anything the handlers would not run as a verb on one task', () => {
  // 2026 without the extension (-32021), tasks/result on 2026 (no such method there), a list.
  expect(taskVerbOf(modern('tasks/get', false))).toBeUndefined();
  expect(taskVerbOf(modern('tasks/result'))).toBeUndefined();
  expect(taskVerbOf({ method: 'tasks/list', params: {} })).toBeUndefined();
  // Prototype names, a task-augmented job tool call (-32601), a missing or non-string id.
  expect(taskVerbOf({ method: 'constructor', params: { taskId: id } })).toBeUndefined();
  expect(
    taskVerbOf({ method: 'tools/call', params: { name: 'constructor', arguments: { jobId: id } } }),
  ).toBeUndefined();
  expect(
    taskVerbOf({
      method: 'tools/call',
      params: { name: 'cancel_job', arguments: { jobId: id }, task: {} },
    }),
  ).toBeUndefined();
  expect(taskVerbOf({ method: 'tasks/get', params: { taskId: 7 } })).toBeUndefined();
  expect(taskVerbOf([{ method: 'tasks/get', params: { taskId: id } }])).toBeUndefined();
  expect(taskVerbOf('tasks/get')).toBeUndefined();
});
