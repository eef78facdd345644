// Tests of the local Step Functions server against AWS behaviour the pipeline depends on.
// Run: node --test local/sfn-server/ (the Go test internal/localrun TestSFNServer runs it in make test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';

const calls = [];
let failAt = new Set(); // payload.i values that fail (once each, unless sticky)
let sticky = new Set();
const seen = new Set(); // keys of the fault modes already answered
const throttled = new Map(); // key -> invocations of a "throttles" payload so far
const slowDone = []; // when slow invocations answered
let lambda, sfn, endpoint, eventsServer;
let faulty; // a second server with the fault switches (the last tests)
const statusEvents = []; // what the server POSTed to --events-endpoint

before(async () => {
  lambda = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const fn = decodeURIComponent(req.url.split('/')[3]);
      const payload = JSON.parse(Buffer.concat(chunks).toString());
      calls.push({ fn, payload });
      const i = payload?.i;
      // Modes of the fault tests, each once per key: AWS's answers for a killed process, a function
      // timeout and throttling (lambda Invoke API: X-Amz-Function-Error, 429 TooManyRequestsException).
      const mode = payload?.mode;
      // throttles: the first N invocations of the key are throttled, with the body Lambda sends
      // for the account's concurrency.
      if (payload?.throttles) {
        throttled.set(payload.key, (throttled.get(payload.key) ?? 0) + 1);
        if (throttled.get(payload.key) <= payload.throttles) {
          res.writeHead(429, { 'x-amzn-errortype': 'TooManyRequestsException', 'content-type': 'application/json' });
          res.end(JSON.stringify({ Reason: 'ConcurrentInvocationLimitExceeded', Type: 'User', message: 'Rate Exceeded.' }));
          return;
        }
      }
      if (mode && !seen.has(payload.key)) {
        seen.add(payload.key);
        if (mode === 'crash') {
          res.writeHead(200, { 'x-amz-function-error': 'Unhandled' });
          res.end(JSON.stringify({ errorMessage: 'RequestId: 1 Error: Runtime exited with error: signal: killed' }));
          return;
        }
        if (mode === 'timeout') {
          res.writeHead(200, { 'x-amz-function-error': 'Unhandled' });
          res.end(JSON.stringify({ errorType: 'Sandbox.Timedout', errorMessage: 'RequestId: 2 Error: Task timed out after 1.00 seconds' }));
          return;
        }
        if (mode === 'throttle') {
          res.writeHead(429, { 'x-amzn-errortype': 'TooManyRequestsException' });
          res.end(JSON.stringify({ message: 'Rate Exceeded.' }));
          return;
        }
      }
      if (payload?.slowFailMs) {
        calls.push({ fn, payload, slowFail: true });
        setTimeout(() => {
          res.writeHead(200, { 'x-amz-function-error': 'Unhandled' });
          res.end(JSON.stringify({ errorType: 'RetryableError', errorMessage: 'slow failure' }));
        }, payload.slowFailMs);
        return;
      }
      if (payload?.slowMs) {
        setTimeout(() => {
          slowDone.push(Date.now());
          res.end(JSON.stringify({ echoed: payload }));
        }, payload.slowMs);
        return;
      }
      if (sticky.has(i) || failAt.has(i)) {
        failAt.delete(i);
        res.writeHead(200, { 'x-amz-function-error': 'Unhandled' });
        res.end(JSON.stringify({ errorType: sticky.has(i) ? 'PermanentError' : 'RetryableError', errorMessage: `item ${i}` }));
        return;
      }
      if (payload?.step) {
        // A Register that works through payload.step chunks per invocation and returns the cursor.
        const next = Math.min(payload.i + payload.step, payload.last + 1);
        res.end(JSON.stringify({ next, done: next > payload.last }));
        return;
      }
      res.end(JSON.stringify({ echoed: payload }));
    });
  });
  await new Promise((r) => lambda.listen(0, '127.0.0.1', r));
  eventsServer = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      statusEvents.push(JSON.parse(Buffer.concat(chunks).toString()));
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise((r) => eventsServer.listen(0, '127.0.0.1', r));
  ({ proc: sfn, endpoint } = await spawnServer(['--events-endpoint', `http://127.0.0.1:${eventsServer.address().port}/events`]));
});

after(() => {
  sfn?.kill();
  faulty?.kill();
  lambda?.close();
  eventsServer?.close();
});

// spawnServer starts a Step Functions server on the test's Lambda endpoint with extra arguments.
async function spawnServer(extra) {
  const proc = spawn(process.execPath, [fileURLToPath(new URL('./server.mjs', import.meta.url)), '--lambda-endpoint', `http://127.0.0.1:${lambda.address().port}`, ...extra],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve, reject) => {
    proc.stdout.once('data', (d) => resolve(String(d)));
    proc.once('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  return { proc, endpoint: `http://127.0.0.1:${JSON.parse(line).port}` };
}

async function api(op, body, at = endpoint) {
  const res = await fetch(at, { method: 'POST', headers: { 'x-amz-target': `AWSStepFunctions.${op}`, 'content-type': 'application/x-amz-json-1.0' }, body: JSON.stringify(body) });
  const json = await res.json();
  if (res.status !== 200) {
    const e = new Error(json.message);
    e.type = json.__type;
    throw e;
  }
  return json;
}

async function waitDone(arn, at = endpoint) {
  for (let i = 0; i < 400; i++) {
    const d = await api('DescribeExecution', { executionArn: arn }, at);
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
  // The redriven execution continues its history: one ExecutionStarted, ExecutionFailed, then
  // ExecutionRedriven and ExecutionSucceeded.
  const events = (await history(s.executionArn, false, 1000)).map((e) => e.type);
  assert.equal(events.length, file.historyEvents);
  assert.deepEqual(events.filter((t) => t.startsWith('Execution')), ['ExecutionStarted', 'ExecutionFailed', 'ExecutionRedriven', 'ExecutionSucceeded']);
});

// The per-invocation segment: Register gets the cursor in its input and returns the next one, and a
// Choice loops back until done.
const cursorChild = {
  StartAt: 'Cursor',
  States: {
    Cursor: { Type: 'Pass', Parameters: { 'chunk.$': '$.first' }, ResultPath: '$.cursor', Next: 'Register' },
    Register: {
      Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke',
      Parameters: { FunctionName: fn, Payload: { 'i.$': '$.cursor.chunk', 'last.$': '$.last', step: 3 } },
      ResultSelector: { 'chunk.$': '$.Payload.next', 'done.$': '$.Payload.done' }, ResultPath: '$.cursor',
      Retry: [{ ErrorEquals: ['RetryableError'], IntervalSeconds: 0, MaxAttempts: 2 }], Next: 'NextChunks',
    },
    NextChunks: { Type: 'Choice', Choices: [{ Variable: '$.cursor.done', BooleanEquals: true, Next: 'SegmentDone' }], Default: 'Register' },
    SegmentDone: { Type: 'Succeed', OutputPath: null },
  },
};

test('a cursor loop: Register, Choice, Register; a retry and a redrive resume at the failed invocation\'s cursor', async () => {
  const c = await api('CreateStateMachine', { name: 'cursor-seg', definition: JSON.stringify(cursorChild), roleArn: 'arn:aws:iam::000000000000:role/r' });
  calls.length = 0;
  failAt = new Set([3]); // the second invocation fails once and is retried with the same cursor
  sticky = new Set([6]); // the third fails for good
  const s = await api('StartExecution', { stateMachineArn: c.stateMachineArn, name: 'cursor-1', input: JSON.stringify({ first: 0, last: 9 }) });
  const d = await waitDone(s.executionArn);
  assert.equal(d.status, 'FAILED');
  assert.equal(d.error, 'PermanentError');
  assert.deepEqual(calls.map((x) => x.payload.i), [0, 3, 3, 6]);
  sticky = new Set();
  calls.length = 0;
  await api('RedriveExecution', { executionArn: s.executionArn });
  const r = await waitDone(s.executionArn);
  assert.equal(r.status, 'SUCCEEDED', JSON.stringify(r));
  assert.equal(r.output, '{}');
  // The redrive resumes at the failed Register with the cursor that was its input.
  assert.deepEqual(calls.map((x) => x.payload.i), [6, 9]);
  // Per invocation: TaskStateEntered, TaskScheduled, TaskStarted, TaskSucceeded, TaskStateExited,
  // ChoiceStateEntered, ChoiceStateExited = 7; a retried attempt adds TaskFailed, TaskScheduled,
  // TaskStarted = 3; the failed attempt: entered, scheduled, started, failed = 4.
  const events = (await history(s.executionArn, false, 1000)).map((e) => e.type);
  const want = 1 + 2 + 7 + (7 + 3) + 4 + 1 /* ExecutionFailed */ + 1 /* ExecutionRedriven */ + 7 + 7 + 2 /* Succeed */ + 1;
  assert.equal(events.length, want, events.join(' '));
  assert.equal(events.filter((t) => t === 'ChoiceStateEntered').length, 4);
});

async function localStats(at = endpoint) {
  return (await fetch(at, { method: 'POST', headers: { 'x-amz-target': 'LocalStepFunctions.Stats' }, body: '{}' })).json();
}

// All events of an execution, page by page.
async function history(arn, reverseOrder = false, maxResults = 7, at = endpoint) {
  const events = [];
  let nextToken;
  do {
    const page = await api('GetExecutionHistory', { executionArn: arn, reverseOrder, maxResults, nextToken }, at);
    assert.ok(page.events.length <= maxResults, `page of ${page.events.length} events, maxResults ${maxResults}`);
    events.push(...page.events);
    nextToken = page.nextToken;
  } while (nextToken);
  return events;
}

test('Lambda failures are named as Step Functions names them: Lambda.Unknown, Sandbox.Timedout, Lambda.TooManyRequestsException', async () => {
  const def = {
    StartAt: 'Register',
    States: { Register: {
      Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' },
      Retry: [{ ErrorEquals: ['Lambda.Unknown', 'Sandbox.Timedout', 'Lambda.TooManyRequestsException'], IntervalSeconds: 0, MaxAttempts: 1 }],
      ResultPath: null, End: true } },
  };
  const m = await api('CreateStateMachine', { name: 'names', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  for (const [mode, want] of [['crash', 'Lambda.Unknown'], ['timeout', 'Sandbox.Timedout'], ['throttle', 'Lambda.TooManyRequestsException']]) {
    const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: mode, input: JSON.stringify({ mode, key: `names-${mode}` }) });
    const d = await waitDone(s.executionArn);
    assert.equal(d.status, 'SUCCEEDED', `${mode}: ${JSON.stringify(d)}`);
    const failed = (await history(s.executionArn)).filter((e) => e.type === 'TaskFailed');
    assert.deepEqual(failed.map((e) => e.taskFailedEventDetails.error), [want], mode);
    if (mode === 'crash') assert.match(failed[0].taskFailedEventDetails.cause, /did not return an error type/);
  }
  // Without a Retry that names it, the killed invocation fails the execution with Lambda.Unknown.
  const bare = { StartAt: 'Register', States: { Register: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' }, End: true } } };
  const b = await api('CreateStateMachine', { name: 'bare', definition: JSON.stringify(bare), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const s = await api('StartExecution', { stateMachineArn: b.stateMachineArn, name: 'crash', input: JSON.stringify({ mode: 'crash', key: 'bare-crash' }) });
  const d = await waitDone(s.executionArn);
  assert.equal(d.status, 'FAILED');
  assert.equal(d.error, 'Lambda.Unknown');
});

// The pipeline waits out a throttle with a retrier of MaxAttempts 99999999 whose waits are capped by
// MaxDelaySeconds and drawn below the cap (JitterStrategy FULL)
// (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html). The library
// honours both: with IntervalSeconds 1000 and MaxDelaySeconds 1 the execution succeeds after its
// throttles instead of waiting 1000 s, and every throttle is its own TaskFailed attempt.
test('a throttle retrier honours MaxDelaySeconds and JitterStrategy FULL, so MaxAttempts 99999999 waits a throttle out', async () => {
  const def = {
    StartAt: 'Register',
    States: { Register: {
      Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' },
      Retry: [{ ErrorEquals: ['Lambda.TooManyRequestsException'], IntervalSeconds: 1000, BackoffRate: 2, MaxDelaySeconds: 1, JitterStrategy: 'FULL', MaxAttempts: 99999999 }],
      ResultPath: null, End: true } },
  };
  const m = await api('CreateStateMachine', { name: 'throttle-retrier', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'throttled', input: JSON.stringify({ throttles: 3, key: 'throttle-retrier' }) });
  const d = await waitDone(s.executionArn);
  assert.equal(d.status, 'SUCCEEDED', JSON.stringify(d));
  const failed = (await history(s.executionArn)).filter((e) => e.type === 'TaskFailed');
  assert.deepEqual(failed.map((e) => e.taskFailedEventDetails.error), Array(3).fill('Lambda.TooManyRequestsException'));
});

// A Map whose iterations return their input: the collected array is counted before ResultPath
// discards it (AWS counts it against the 256 KiB payload quota).
function wideMap(discard) {
  return {
    StartAt: 'Items',
    States: {
      Items: { Type: 'Pass', Parameters: { 'items.$': 'States.ArrayRange(1, 300, 1)', 'wide.$': 'States.Format(\'{}\', $.wide)' }, Next: 'Chunks' },
      Chunks: {
        Type: 'Map', MaxConcurrency: 1, ItemsPath: '$.items', ItemSelector: { 'wide.$': '$.wide', 'i.$': '$$.Map.Item.Value' }, ResultPath: null,
        ItemProcessor: { StartAt: 'Work', States: { Work: discard
          ? { Type: 'Pass', ResultPath: null, OutputPath: '$.none', End: true }
          : { Type: 'Pass', ResultPath: null, End: true } } },
        End: true,
      },
    },
  };
}

test('CreateStateMachine refuses an invalid definition with InvalidDefinition, each time, before and after valid ones', async () => {
  const role = 'arn:aws:iam::000000000000:role/r';
  const valid = { StartAt: 'Done', States: { Done: { Type: 'Pass', End: true } } };
  const invalid = [
    // No such state type: the schema check.
    { StartAt: 'Done', States: { Done: { Type: 'Sleep', End: true } } },
    // A malformed path: the path format, compiled into the validator.
    { StartAt: 'Done', States: { Done: { Type: 'Pass', InputPath: 'no dollar', End: true } } },
    // A Task whose Resource is not an ARN: the ARN format, compiled into the validator.
    { StartAt: 'Done', States: { Done: { Type: 'Task', Resource: 'register', End: true } } },
  ];
  // The validator is compiled once and kept (patch.mjs); every definition is still judged.
  for (const round of [1, 2]) {
    await api('CreateStateMachine', { name: `valid-${round}`, definition: JSON.stringify(valid), roleArn: role });
    for (const [i, def] of invalid.entries()) {
      await assert.rejects(api('CreateStateMachine', { name: `invalid-${round}-${i}`, definition: JSON.stringify(def), roleArn: role }),
        (e) => e.type === 'InvalidDefinition', `round ${round}, definition ${i}`);
    }
  }
});

test('ResultPath "$" replaces the input with the result, as on AWS', async () => {
  const def = {
    StartAt: 'Replace',
    States: {
      Replace: { Type: 'Pass', Result: { done: true }, ResultPath: '$', Next: 'Selected' },
      Selected: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, Payload: { x: 1 } }, ResultSelector: { 'n.$': '$.Payload.echoed.x' }, ResultPath: '$', End: true },
    },
  };
  const m = await api('CreateStateMachine', { name: 'resultpath', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'r', input: JSON.stringify({ big: 'x'.repeat(100) }) });
  const d = await waitDone(s.executionArn);
  assert.equal(d.status, 'SUCCEEDED', JSON.stringify(d));
  assert.deepEqual(JSON.parse(d.output), { n: 1 });
});

test('a Map whose collected results exceed 256 KiB fails with States.DataLimitExceeded even with ResultPath null', async () => {
  const wide = 'x'.repeat(1000); // 300 iterations × ≈ 1,020 B ≈ 306,000 B > 262,144 B; each state payload ≈ 2 KB
  for (const [name, discard, want] of [['kept', false, 'FAILED'], ['discarded', true, 'SUCCEEDED']]) {
    const def = wideMap(discard);
    if (discard) def.States.Chunks.ItemProcessor.States.Work = { Type: 'Pass', Parameters: {}, End: true }; // the iteration returns {}
    const m = await api('CreateStateMachine', { name: `wide-${name}`, definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
    const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'w', input: JSON.stringify({ wide }) });
    const d = await waitDone(s.executionArn);
    assert.equal(d.status, want, `${name}: ${JSON.stringify(d)}`);
    const stats = (await localStats()).executions.find((e) => e.executionArn === s.executionArn);
    if (want === 'FAILED') {
      assert.equal(d.error, 'States.DataLimitExceeded');
      assert.match(d.cause, /Map state Chunks/);
      // The Map fails at the iteration that takes the array over the limit; later ones never start.
      const started = (await history(s.executionArn, false, 1000)).filter((e) => e.type === 'MapIterationStarted').length;
      const per = JSON.stringify({ wide, i: 100 }).length + 1;
      assert.ok(started < 300 && started >= Math.floor(256 * 1024 / per), `iterations started: got ${started}, want the first ≈ ${Math.ceil(256 * 1024 / per)}`);
    } else {
      assert.ok(stats.maxPayloadBytes < 4000, `largest payload: got ${stats.maxPayloadBytes} B, want the ≈ 2 KB of one state`);
    }
  }
});

test('GetExecutionHistory: AWS event shape, paging both ways; TaskSubmitted names the .sync:2 child; StopExecution stops the child, not the running Lambda', async () => {
  const childDef = { StartAt: 'Register', States: { Register: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' }, ResultPath: null, End: true } } };
  const c = await api('CreateStateMachine', { name: 'slow-seg', definition: JSON.stringify(childDef), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const parentDef = {
    StartAt: 'Segments',
    States: { Segments: {
      Type: 'Map', MaxConcurrency: 1, ItemsPath: '$.segs', ResultPath: null,
      ItemProcessor: { StartAt: 'Seg', States: { Seg: { Type: 'Task', Resource: 'arn:aws:states:::states:startExecution.sync:2', Parameters: { StateMachineArn: c.stateMachineArn, 'Input.$': '$' }, ResultPath: null, End: true } } },
      End: true } },
  };
  const p = await api('CreateStateMachine', { name: 'slow-file', definition: JSON.stringify(parentDef), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const s = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'f', input: JSON.stringify({ segs: [{ slowMs: 10 }, { slowMs: 1500 }] }) });
  // Wait until the second child runs.
  let children = [];
  for (let i = 0; i < 100 && children.length < 2; i++) {
    await new Promise((r) => setTimeout(r, 20));
    children = (await localStats()).executions.filter((e) => e.parentArn === s.executionArn);
  }
  assert.equal(children.length, 2);
  await new Promise((r) => setTimeout(r, 100)); // the Lambda call is under way
  const newest = await api('GetExecutionHistory', { executionArn: s.executionArn, reverseOrder: true, maxResults: 25 });
  const submitted = newest.events.find((e) => e.type === 'TaskSubmitted' && e.taskSubmittedEventDetails.resource === 'startExecution.sync:2');
  assert.ok(submitted, JSON.stringify(newest.events.map((e) => e.type)));
  assert.equal(submitted.taskSubmittedEventDetails.resourceType, 'states');
  const out = JSON.parse(submitted.taskSubmittedEventDetails.output);
  assert.equal(out.ExecutionArn, children[1].executionArn);
  assert.equal(typeof out.StartDate, 'number');
  assert.equal((await api('DescribeExecution', { executionArn: out.ExecutionArn })).status, 'RUNNING');

  const stop = await api('StopExecution', { executionArn: s.executionArn, error: 'Operator', cause: 'test' });
  const d = await waitDone(s.executionArn);
  assert.equal(d.status, 'ABORTED');
  const child = await waitDone(out.ExecutionArn);
  assert.equal(child.status, 'ABORTED', 'the running .sync:2 child is stopped with its parent');
  // The Lambda invocation is not stopped: it answers after the stop.
  const answered = slowDone.length;
  for (let i = 0; i < 100 && slowDone.length === answered; i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(slowDone.length > answered && slowDone.at(-1) > stop.stopDate * 1000, 'the running invocation completes after StopExecution');

  const forward = await history(s.executionArn);
  const backward = await history(s.executionArn, true, 4);
  assert.deepEqual(backward.map((e) => e.id), forward.map((e) => e.id).reverse());
  assert.deepEqual(forward.map((e) => e.id), forward.map((_, i) => i + 1));
  for (const e of forward) {
    assert.equal(e.previousEventId, e.id - 1);
    assert.equal(typeof e.timestamp, 'number');
  }
  assert.equal(forward[0].type, 'ExecutionStarted');
  assert.equal(forward.at(-1).type, 'ExecutionAborted');
  assert.deepEqual(forward.at(-1).executionAbortedEventDetails, { error: 'Operator', cause: 'test' });
  assert.equal(forward.filter((e) => e.type === 'TaskSubmitted').length, 2);
  const types = new Set(forward.map((e) => e.type));
  for (const t of ['MapStateEntered', 'MapStateStarted', 'MapIterationStarted', 'MapIterationSucceeded', 'TaskScheduled', 'TaskStarted', 'TaskSucceeded']) assert.ok(types.has(t), t);
  await assert.rejects(api('GetExecutionHistory', { executionArn: s.executionArn, nextToken: 'x' }), (e) => e.type === 'InvalidToken');
});

test('GetExecutionHistory returns data fields whole, as AWS does up to 256 KiB: never truncated', async () => {
  const def = { StartAt: 'Work', States: { Work: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke',
    Parameters: { FunctionName: fn, 'Payload.$': '$' }, ResultSelector: { 'echoed.$': '$.Payload.echoed' }, ResultPath: '$.result', End: true } } };
  const m = await api('CreateStateMachine', { name: 'whole-data', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const big = 'x'.repeat(20_000);
  const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'd', input: JSON.stringify({ big }) });
  assert.equal((await waitDone(s.executionArn)).status, 'SUCCEEDED');
  const events = await history(s.executionArn);
  const started = events.find((e) => e.type === 'ExecutionStarted').executionStartedEventDetails;
  assert.deepEqual(JSON.parse(started.input), { big });
  const exited = events.find((e) => e.type === 'TaskStateExited').stateExitedEventDetails;
  assert.equal(JSON.parse(exited.output).result.echoed.big, big, 'the state output is whole');
  let fields = 0;
  for (const e of events) {
    for (const [k, d] of Object.entries(e)) {
      if (!k.endsWith('EventDetails')) continue;
      for (const [f, x] of Object.entries(d)) {
        if (!f.endsWith('Details') || typeof x !== 'object') continue;
        fields++;
        assert.equal(x.truncated, false, `${e.type}.${f}`);
      }
    }
  }
  assert.ok(fields >= 4, `data fields seen: ${fields}`);
});

test('a stopped execution makes no further attempt of a task it was retrying', async () => {
  const def = {
    StartAt: 'Register',
    States: { Register: {
      Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' },
      Retry: [{ ErrorEquals: ['RetryableError'], IntervalSeconds: 1, MaxAttempts: 3 }], End: true } },
  };
  const m = await api('CreateStateMachine', { name: 'stop-retry', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const before = calls.filter((c) => c.slowFail).length;
  const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 's', input: JSON.stringify({ slowFailMs: 300 }) });
  await new Promise((r) => setTimeout(r, 100));
  await api('StopExecution', { executionArn: s.executionArn });
  assert.equal((await waitDone(s.executionArn)).status, 'ABORTED');
  await new Promise((r) => setTimeout(r, 1800)); // past the failed attempt (0.3 s) and the retry interval (1 s)
  assert.equal(calls.filter((c) => c.slowFail).length - before, 1, 'Lambda invocations of the stopped execution');
});

// Step Functions sends a "Step Functions Execution Status Change" event for every status change of a
// Standard workflow's execution, detail with executionArn, stateMachineArn, name, status, startDate
// and stopDate in epoch milliseconds, input and output
// (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html; the example
// event in lambdas/controller/testdata/status-change.json).
test('status change events: RUNNING and the end of each execution, a redrive RUNNING again, in the EventBridge shape', async () => {
  const def = { StartAt: 'Go', States: { Go: { Type: 'Task', Resource: fn, End: true } } };
  const m = await api('CreateStateMachine', { name: 'events', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  sticky = new Set(['bad']);
  const ok = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'ok-1', input: JSON.stringify({ i: 'good' }) });
  const bad = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'bad-1', input: JSON.stringify({ i: 'bad' }) });
  const okDone = await waitDone(ok.executionArn);
  await waitDone(bad.executionArn);
  sticky = new Set();
  await api('RedriveExecution', { executionArn: bad.executionArn });
  await waitDone(bad.executionArn);
  const of = (arn) => statusEvents.filter((e) => e.detail.executionArn === arn);
  for (let i = 0; i < 100 && (of(ok.executionArn).length < 2 || of(bad.executionArn).length < 4); i++) await new Promise((r) => setTimeout(r, 20));

  const okEvents = of(ok.executionArn);
  assert.deepEqual(okEvents.map((e) => e.detail.status).sort(), ['RUNNING', 'SUCCEEDED']);
  assert.deepEqual(of(bad.executionArn).map((e) => e.detail.status).sort(), ['RUNNING', 'RUNNING', 'SUCCEEDED', 'FAILED'].sort());
  for (const e of okEvents) {
    assert.equal(e.source, 'aws.states');
    assert.equal(e['detail-type'], 'Step Functions Execution Status Change');
    assert.deepEqual(e.resources, [ok.executionArn]);
    assert.equal(e.detail.stateMachineArn, m.stateMachineArn);
    assert.equal(e.detail.name, 'ok-1');
    assert.equal(e.detail.startDate, Math.round(okDone.startDate * 1000));
    assert.equal(e.detail.input, JSON.stringify({ i: 'good' }));
  }
  const end = okEvents.find((e) => e.detail.status === 'SUCCEEDED');
  assert.equal(end.detail.stopDate, Math.round(okDone.stopDate * 1000));
  assert.equal(end.detail.output, okDone.output);
  const running = okEvents.find((e) => e.detail.status === 'RUNNING');
  assert.equal(running.detail.stopDate, null);
  assert.equal(running.detail.output, null);
  const failed = of(bad.executionArn).find((e) => e.detail.status === 'FAILED');
  assert.equal(failed.detail.error, 'PermanentError');
  assert.equal(failed.detail.redriveStatus, 'REDRIVABLE');
});

// ---- Fault switches: ambiguous Lambda and child-start failures ------------------------------------

const slowFn = 'arn:aws:lambda:us-east-1:000000000000:function:slow-register';

async function faultyServer() {
  if (!faulty) {
    let at;
    ({ proc: faulty, endpoint: at } = await spawnServer(['--lambda-client-timeout', 'slow-register=300', '--lose-child-start-answers', '3', '--retry-interval-scale', '0.01']));
    faulty.endpoint = at;
  }
  return faulty.endpoint;
}

// AWS reports Lambda.ClientExecutionTimeoutException when its own Invoke call times out; the
// invocation itself is not stopped (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html).
test('--lambda-client-timeout: an Invoke that outlasts it fails with Lambda.ClientExecutionTimeoutException while the invocation goes on; --retry-interval-scale shortens the Retry', async () => {
  const at = await faultyServer();
  const def = {
    StartAt: 'Register',
    States: { Register: {
      Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: slowFn, 'Payload.$': '$' },
      // 100 s, scaled by 0.01 to 1 s.
      Retry: [{ ErrorEquals: ['Lambda.ClientExecutionTimeoutException'], IntervalSeconds: 100, MaxAttempts: 1 }],
      ResultPath: null, End: true } },
  };
  const m = await api('CreateStateMachine', { name: 'client-timeout', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' }, at);
  const answered = slowDone.length;
  const s = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: 'c', input: JSON.stringify({ slowMs: 800 }) }, at);
  const d = await waitDone(s.executionArn, at);
  assert.equal(d.status, 'FAILED', JSON.stringify(d));
  assert.equal(d.error, 'Lambda.ClientExecutionTimeoutException');
  const events = await history(s.executionArn, false, 100, at);
  const failed = events.filter((e) => e.type === 'TaskFailed');
  assert.deepEqual(failed.map((e) => e.taskFailedEventDetails.error), ['Lambda.ClientExecutionTimeoutException', 'Lambda.ClientExecutionTimeoutException']);
  const scheduled = events.filter((e) => e.type === 'TaskScheduled').map((e) => e.timestamp);
  const gap = scheduled[1] - scheduled[0];
  assert.ok(gap >= 1.2 && gap < 5, `second attempt ${gap.toFixed(2)} s after the first, want 0.3 s (client timeout) + 1 s (the 100 s Retry scaled by 0.01)`);
  // Both invocations answer after the execution has failed: Lambda ran them to their end.
  for (let i = 0; i < 100 && slowDone.length < answered + 2; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(slowDone.length - answered, 2, 'invocations answered');
  assert.ok(slowDone.at(-1) > d.stopDate * 1000, 'the last invocation goes on after the execution failed');
  // A function without a client timeout waits for its answer.
  const plain = { StartAt: 'T', States: { T: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$' }, End: true } } };
  const p = await api('CreateStateMachine', { name: 'no-client-timeout', definition: JSON.stringify(plain), roleArn: 'arn:aws:iam::000000000000:role/r' }, at);
  const ok = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'p', input: JSON.stringify({ slowMs: 500 }) }, at);
  assert.equal((await waitDone(ok.executionArn, at)).status, 'SUCCEEDED');
});

// The library's own digests are wrong from 56 bytes on (patch.mjs); the file executions' names are
// 67 characters (ov-<sha-256>), so every child name depends on it.
test('States.Hash gives the standard digests of inputs of any length', async () => {
  const def = { StartAt: 'H', States: { H: { Type: 'Pass', Parameters: {
    'md5.$': "States.Hash($.s, 'MD5')", 'sha1.$': "States.Hash($.s, 'SHA-1')", 'sha256.$': "States.Hash($.s, 'SHA-256')",
    'sha384.$': "States.Hash($.s, 'SHA-384')", 'sha512.$': "States.Hash($.s, 'SHA-512')" }, End: true } } };
  const m = await api('CreateStateMachine', { name: 'hash', definition: JSON.stringify(def), roleArn: 'arn:aws:iam::000000000000:role/r' });
  for (const s of ['', 'file-a', 'x'.repeat(55), 'x'.repeat(56), `ov-${'0123456789abcdef'.repeat(4)}`, 'y'.repeat(80), '注文①'.repeat(30)]) {
    const e = await api('StartExecution', { stateMachineArn: m.stateMachineArn, name: `h-${s.length}-${Buffer.byteLength(s)}`, input: JSON.stringify({ s }) });
    const out = JSON.parse((await waitDone(e.executionArn)).output);
    for (const [alg, node] of [['md5', 'md5'], ['sha1', 'sha1'], ['sha256', 'sha256'], ['sha384', 'sha384'], ['sha512', 'sha512']]) {
      assert.equal(out[alg], createHash(node).update(s, 'utf8').digest('hex'), `${alg} of ${Buffer.byteLength(s)} bytes`);
    }
  }
});

// The workflow's child names: States.Format and States.Hash (SHA-1) of the parent's name, the segment
// index and $$.Execution.RedriveCount, as workflows.go renders them.
const childName = { 'Name.$': "States.Format('{}-s{}-r{}', States.Hash($$.Execution.Name, 'SHA-1'), $.segment.index, $$.Execution.RedriveCount)" };
const sha1 = (s) => createHash('sha1').update(s).digest('hex');

async function namedParent(at, name, childDef) {
  const c = await api('CreateStateMachine', { name: `${name}-seg`, definition: JSON.stringify(childDef), roleArn: 'arn:aws:iam::000000000000:role/r' }, at);
  const parent = {
    StartAt: 'Segments',
    States: { Segments: {
      Type: 'Map', MaxConcurrency: 1, ItemsPath: '$.segs', ItemSelector: { 'segment.$': '$$.Map.Item.Value' }, ResultPath: null,
      ItemProcessor: { StartAt: 'RegisterSegment', States: { RegisterSegment: {
        Type: 'Task', Resource: 'arn:aws:states:::states:startExecution.sync:2',
        Parameters: { StateMachineArn: c.stateMachineArn, 'Input.$': '$', ...childName },
        // 10 s, scaled by 0.01 to 0.1 s.
        Retry: [{ ErrorEquals: ['StepFunctions.SdkClientException'], IntervalSeconds: 10, MaxAttempts: 3 }],
        ResultPath: null, OutputPath: null, End: true } } },
      End: true } },
  };
  return api('CreateStateMachine', { name, definition: JSON.stringify(parent), roleArn: 'arn:aws:iam::000000000000:role/r' }, at);
}

test('--lose-child-start-answers: a start that succeeded but answered an SDK error is retried with the same name and finds the running child: one child per segment', async () => {
  const at = await faultyServer();
  const childDef = { StartAt: 'Register', States: { Register: { Type: 'Task', Resource: 'arn:aws:states:::lambda:invoke', Parameters: { FunctionName: fn, 'Payload.$': '$.segment' }, ResultPath: null, End: true } } };
  const p = await namedParent(at, 'lost-answer', childDef);
  const before = calls.length;
  const s = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'file-a', input: JSON.stringify({ segs: [{ index: 0, slowMs: 600 }, { index: 1, slowMs: 600 }] }) }, at);
  const d = await waitDone(s.executionArn, at);
  assert.equal(d.status, 'SUCCEEDED', JSON.stringify(d));
  const children = (await localStats(at)).executions.filter((e) => e.parentArn === s.executionArn);
  assert.deepEqual(children.map((e) => e.name), [`${sha1('file-a')}-s0-r0`, `${sha1('file-a')}-s1-r0`], 'one child per segment, named from the parent');
  assert.deepEqual(children.map((e) => e.status), ['SUCCEEDED', 'SUCCEEDED']);
  assert.equal(calls.length - before, 2, 'Lambda invocations: one per segment');
  const failed = (await history(s.executionArn, false, 1000, at)).filter((e) => e.type === 'TaskFailed');
  assert.deepEqual(failed.map((e) => e.taskFailedEventDetails.error), ['StepFunctions.SdkClientException', 'StepFunctions.SdkClientException']);
});

test('a retried start whose child already finished fails with StepFunctions.ExecutionAlreadyExistsException; a redrive names a new child', async () => {
  const at = await faultyServer();
  const childDef = { StartAt: 'Done', States: { Done: { Type: 'Pass', End: true } } };
  const p = await namedParent(at, 'finished-child', childDef);
  const s = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'file-b', input: JSON.stringify({ segs: [{ index: 0 }] }) }, at);
  const d = await waitDone(s.executionArn, at);
  assert.equal(d.status, 'FAILED', JSON.stringify(d));
  assert.equal(d.error, 'StepFunctions.ExecutionAlreadyExistsException');
  let children = (await localStats(at)).executions.filter((e) => e.parentArn === s.executionArn);
  assert.deepEqual(children.map((e) => [e.name, e.status]), [[`${sha1('file-b')}-s0-r0`, 'SUCCEEDED']], 'the finished child, and no second one');

  await api('RedriveExecution', { executionArn: s.executionArn }, at);
  const r = await waitDone(s.executionArn, at);
  assert.equal(r.status, 'SUCCEEDED', JSON.stringify(r));
  children = (await localStats(at)).executions.filter((e) => e.parentArn === s.executionArn);
  assert.deepEqual(children.map((e) => e.name), [`${sha1('file-b')}-s0-r0`, `${sha1('file-b')}-s0-r1`]);
});

test('state transitions are counted as AWS bills them: every state entered, in Map iterations and child executions, each retry, and a redrive', async () => {
  const c = await api('CreateStateMachine', { name: 'bill-seg', definition: JSON.stringify(child), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const parent = {
    StartAt: 'Segments',
    States: { Segments: {
      Type: 'Map', MaxConcurrency: 1, ItemsPath: '$.segs', ResultPath: null,
      ItemProcessor: { StartAt: 'Seg', States: { Seg: {
        Type: 'Task', Resource: 'arn:aws:states:::states:startExecution.sync:2',
        Parameters: { StateMachineArn: c.stateMachineArn, 'Input.$': '$' }, ResultPath: null, End: true } } },
      End: true } },
  };
  const p = await api('CreateStateMachine', { name: 'bill-file', definition: JSON.stringify(parent), roleArn: 'arn:aws:iam::000000000000:role/r' });
  failAt = new Set([101]); // retried once
  sticky = new Set([103]); // PermanentError: not retried, the segment and the file fail
  const s = await api('StartExecution', { stateMachineArn: p.stateMachineArn, name: 'bill-1', input: JSON.stringify({ segs: [{ first: 100, last: 101 }, { first: 102, last: 103 }] }) });
  assert.equal((await waitDone(s.executionArn)).status, 'FAILED');
  sticky = new Set();
  await api('RedriveExecution', { executionArn: s.executionArn });
  assert.equal((await waitDone(s.executionArn)).status, 'SUCCEEDED');

  const stats = await localStats();
  const file = stats.executions.find((e) => e.executionArn === s.executionArn);
  const segs = stats.executions.filter((e) => e.parentArn === s.executionArn);
  // Segment 0: Range, Chunks, Register twice, one retry = 5. Segment 1 (failed): Range, Chunks,
  // Register twice = 4. Its redriven replacement: 4 again. The file: Segments and Seg twice = 3, then
  // the redrive 1, Segments entered again 1 and Seg for the failed iteration only 1 = 6.
  assert.deepEqual(segs.map((e) => e.stateTransitions), [5, 4, 4]);
  assert.equal(file.stateTransitions, 6);
  assert.equal(file.stateTransitions + segs.reduce((n, e) => n + e.stateTransitions, 0), 19);
  // The start and end of an execution are not steps: a one-state machine is one transition.
  const one = await api('CreateStateMachine', { name: 'bill-one', definition: JSON.stringify({ StartAt: 'Only', States: { Only: { Type: 'Pass', End: true } } }), roleArn: 'arn:aws:iam::000000000000:role/r' });
  const o = await api('StartExecution', { stateMachineArn: one.stateMachineArn, name: 'bill-one', input: '{}' });
  await waitDone(o.executionArn);
  assert.equal((await localStats()).executions.find((e) => e.executionArn === o.executionArn).stateTransitions, 1);
});
