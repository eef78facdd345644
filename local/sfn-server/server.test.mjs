// Tests of the local Step Functions server against AWS behaviour the pipeline depends on.
// Run: node --test local/sfn-server/ (the Go test internal/localrun TestSFNServer runs it in make test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

const calls = [];
let failAt = new Set(); // payload.i values that fail (once each, unless sticky)
let sticky = new Set();
let lambda, sfn, endpoint;

before(async () => {
  lambda = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const fn = decodeURIComponent(req.url.split('/')[3]);
      const payload = JSON.parse(Buffer.concat(chunks).toString());
      calls.push({ fn, payload });
      const i = payload?.i;
      if (sticky.has(i) || failAt.has(i)) {
        failAt.delete(i);
        res.writeHead(200, { 'x-amz-function-error': 'Unhandled' });
        res.end(JSON.stringify({ errorType: sticky.has(i) ? 'PermanentError' : 'RetryableError', errorMessage: `item ${i}` }));
        return;
      }
      res.end(JSON.stringify({ echoed: payload }));
    });
  });
  await new Promise((r) => lambda.listen(0, '127.0.0.1', r));
  const node = process.execPath;
  sfn = spawn(node, [fileURLToPath(new URL('./server.mjs', import.meta.url)), '--lambda-endpoint', `http://127.0.0.1:${lambda.address().port}`], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    sfn.stdout.once('data', (d) => resolve(String(d)));
    sfn.once('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  endpoint = `http://127.0.0.1:${JSON.parse(line).port}`;
});

after(() => {
  sfn?.kill();
  lambda?.close();
});

async function api(op, body) {
  const res = await fetch(endpoint, { method: 'POST', headers: { 'x-amz-target': `AWSStepFunctions.${op}`, 'content-type': 'application/x-amz-json-1.0' }, body: JSON.stringify(body) });
  const json = await res.json();
  if (res.status !== 200) {
    const e = new Error(json.message);
    e.type = json.__type;
    throw e;
  }
  return json;
}

async function waitDone(arn) {
  for (let i = 0; i < 200; i++) {
    const d = await api('DescribeExecution', { executionArn: arn });
    if (d.status !== 'RUNNING') return d;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('execution did not finish');
}

const fn = 'arn:aws:lambda:us-east-1:000000000000:function:register';
const child = {
  StartAt: 'Range',
  States: {
    Range: { Type: 'Pass', Parameters: { 'items.$': 'States.ArrayRange($.first, $.last, 1)' }, Next: 'Chunks' },
    Chunks: {
      Type: 'Map', MaxConcurrency: 1, ItemsPath: '$.items', ItemSelector: { 'i.$': '$$.Map.Item.Value' }, ResultPath: null,
      ItemProcessor: { StartAt: 'Register', States: { Register: {
        Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' },
        Retry: [{ ErrorEquals: ['RetryableError'], IntervalSeconds: 0, MaxAttempts: 2 }], ResultPath: null, End: true } } },
      End: true,
    },
  },
};

test('Map stops at the first failed iteration, retries, redrive resumes at the failed iteration, sync:2 child', async () => {
  const c = await api('CreateStateMachine', { name: 'seg', definition: JSON.stringify(child), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const parent = {
    StartAt: 'Segments',
    States: { Segments: {
      Type: 'Map', MaxConcurrency: 1, ItemsPath: '$.segs', ResultPath: null,
      ItemProcessor: { StartAt: 'Seg', States: { Seg: {
        Type: 'Task', Resource: 'arn:aws:states:::states:startExecution.sync:2',
        Parameters: { StateMachineArn: c.stateMachineArn, 'Input.$': '$', },
        ResultPath: null, End: true } } },
      End: true } },
  };
  const p = await api('CreateStateMachine', { name: 'file', definition: JSON.stringify(parent), roleArn: 'arn:aws:iam::000000000000:role/r' });
  calls.length = 0;
  failAt = new Set([2]); // retried once, then succeeds
  sticky = new Set([5]); // fails permanently
  const s = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'file-1', input: JSON.stringify({ segs: [{ first: 0, last: 3 }, { first: 4, last: 7 }, { first: 8, last: 9 }] }) });
  // same name, same input, still running: same execution
  const again = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'file-1', input: JSON.stringify({ segs: [{ first: 0, last: 3 }, { first: 4, last: 7 }, { first: 8, last: 9 }] }) });
  assert.equal(again.executionArn, s.executionArn);
  const d = await waitDone(s.executionArn);
  assert.equal(d.status, 'FAILED');
  assert.equal(d.error, 'States.TaskFailed');
  assert.deepEqual(calls.map((c) => c.payload.i), [0, 1, 2, 2, 3, 4, 5]);
  await assert.rejects(api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'file-1', input: '{}' }), (e) => e.type === 'ExecutionAlreadyExists');
  await assert.rejects(api('DescribeExecution', { executionArn: s.executionArn + 'x' }), (e) => e.type === 'ExecutionDoesNotExist');

  sticky = new Set();
  calls.length = 0;
  await api('RedriveExecution', { executionArn: s.executionArn });
  const r = await waitDone(s.executionArn);
  assert.equal(r.status, 'SUCCEEDED', JSON.stringify(r));
  assert.equal(r.redriveCount, 1);
  // the first segment is not rerun; the failed segment starts again as a new child execution
  assert.deepEqual(calls.map((c) => c.payload.i), [4, 5, 6, 7, 8, 9]);

  const stats = await (await fetch(endpoint, { method: 'POST', headers: { 'x-amz-target': 'LocalStepFunctions.Stats' }, body: '{}' })).json();
  const segs = stats.executions.filter((e) => e.parentArn === s.executionArn);
  assert.deepEqual(segs.map((e) => e.status), ['SUCCEEDED', 'FAILED', 'SUCCEEDED', 'SUCCEEDED']);
  // Execution started+succeeded 2, Pass 2, Map entered+started+succeeded+exited 4, 7 per iteration,
  // 3 more for a failed attempt that is retried (TaskScheduled, TaskStarted, TaskFailed); a failed
  // iteration ends with MapIterationFailed, MapStateFailed, ExecutionFailed.
  assert.deepEqual(segs.map((e) => e.historyEvents), [8 + 4 * 7 + 3, 1 + 2 + 2 + 7 + (1 + 1 + 3 + 1) + 1 + 1, 8 + 4 * 7, 8 + 2 * 7]);
  const file = stats.executions.find((e) => e.executionArn === s.executionArn);
  assert.ok(file.historyEvents > 0 && file.maxPayloadBytes > 0);
});
