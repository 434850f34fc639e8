export const SERVER_INFO = { name: 'mcp-task-gateway', version: '0.1.0' } as const;
export const INSTRUCTIONS =
  'Long-running tools run as durable tasks owned by your identity. Clients without task ' +
  'support get a job handle and poll it with get_job_status / get_job_result.';
