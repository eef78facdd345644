// A small local Step Functions endpoint for the end-to-end runner (docs/local-run.md).
//
// It speaks the Step Functions JSON 1.0 protocol (X-Amz-Target: AWSStepFunctions.<Operation>) for the
// operations the pipeline and the harness use, and runs the state machine definitions it is given with
// aws-local-stepfunctions. Task states are answered by local handlers:
//   - arn:aws:states:::lambda:invoke and plain Lambda ARNs: the Lambda Invoke API of the Go harness
//     (--lambda-endpoint), which runs the real function binaries;
//   - arn:aws:states:::states:startExecution(.sync, .sync:2): a child execution on this same server.
//
// It counts history events the way AWS writes them (see countEvent) and the state transitions AWS
// bills (countTransition; LocalStepFunctions.Stats reports both per execution), measures state payloads, and
// enforces the 25,000-event and 256 KiB limits as AWS does
// (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html).
//
// With --events-endpoint URL it POSTs a "Step Functions Execution Status Change" event (one JSON
// event per request) to URL whenever an execution's status changes (see emitStatus).
//
// Fault switches, off by default (docs/local-run.md, "Ambiguous failures"):
//   --lambda-client-timeout FUNCTION=MS (repeatable): an Invoke of FUNCTION (its name or ARN) that has
//     not answered after MS ms fails the task with Lambda.ClientExecutionTimeoutException, and the
//     invocation goes on running, as when Step Functions' own Invoke call times out;
//   --lose-child-start-answers N: the first N child executions a task starts (each name once) are
//     created, and then the task's StartExecution fails with StepFunctions.SdkClientException, as when
//     the answer of a start that succeeded is lost;
//   --retry-interval-scale F: every Retry's IntervalSeconds and MaxDelaySeconds are multiplied by F, so
//     a scenario can wait out a retrier meant for minutes (which errors are retried, and how often,
//     stays as defined).
//
// Usage: node server.mjs --lambda-endpoint http://127.0.0.1:PORT [--events-endpoint URL] [--port 0] [--region R] [--account A]
//          [--lambda-client-timeout FUNCTION=MS ...] [--lose-child-start-answers N] [--retry-interval-scale F]
// Prints one JSON line {"port": N} on stdout when it is listening on 127.0.0.1.
import './patch.mjs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const { StateMachine, ExecutionAbortedError, ExecutionTimeoutError } = await import('aws-local-stepfunctions');
const { patched, validatorPatched } = await import('./patch.mjs');

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'lambda-endpoint': { type: 'string' },
    'events-endpoint': { type: 'string' },
    region: { type: 'string', default: 'us-east-1' },
    account: { type: 'string', default: '000000000000' },
    'lambda-client-timeout': { type: 'string', multiple: true, default: [] },
    'lose-child-start-answers': { type: 'string', default: '0' },
    'retry-interval-scale': { type: 'string', default: '1' },
  },
});
if (!args['lambda-endpoint']) {
  console.error('sfn-server: --lambda-endpoint is required');
  process.exit(2);
}
// Function name -> ms after which an Invoke call is given up (--lambda-client-timeout).
const clientTimeouts = new Map();
for (const v of args['lambda-client-timeout']) {
  const at = v.lastIndexOf('=');
  const ms = Number(v.slice(at + 1));
  if (at < 1 || !Number.isFinite(ms) || ms <= 0) {
    console.error(`sfn-server: --lambda-client-timeout ${v}: want FUNCTION=MS`);
    process.exit(2);
  }
  clientTimeouts.set(functionNameOf(v.slice(0, at)), ms);
}
let loseChildStartAnswers = Number(args['lose-child-start-answers']);
const retryIntervalScale = Number(args['retry-interval-scale']);
if (!Number.isInteger(loseChildStartAnswers) || loseChildStartAnswers < 0 || !(retryIntervalScale > 0)) {
  console.error('sfn-server: --lose-child-start-answers must be an integer >= 0 and --retry-interval-scale > 0');
  process.exit(2);
}
if (!patched || !validatorPatched) {
  console.error('sfn-server: the patches of patch.mjs were not applied');
  process.exit(2);
}

// Limits from https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html
const MAX_HISTORY_EVENTS = 25000;
const MAX_PAYLOAD_BYTES = 256 * 1024;
// AWS's default Task TimeoutSeconds is 99999999 (https://docs.aws.amazon.com/step-functions/latest/dg/state-task.html);
// the library defaults to 60 s, and Node timers cap at 2^31-1 ms, so Tasks without a timeout get the
// largest value a Node timer can hold (about 24 days).
const NO_TASK_TIMEOUT_SECONDS = 2147483;

const machines = new Map(); // stateMachineArn -> machine
const lostStartAnswers = new Set(); // child executions whose start answer was lost (--lose-child-start-answers)
const executions = new Map(); // executionArn -> execution
const apiCalls = {};

class TaskError extends Error {
  constructor(name, cause) {
    super(cause);
    this.name = name;
  }
}

class ApiError extends Error {
  constructor(type, message, status = 400) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

const seconds = (ms) => (ms === undefined ? undefined : ms / 1000);
const payloadBytes = (v) => (v === undefined ? 0 : Buffer.byteLength(JSON.stringify(v) ?? ''));

// Execution names: 1–80 characters, none of the characters AWS forbids
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html).
const FORBIDDEN_NAME = /[\s<>{}\[\]?*"#%\\^|~`$&,;:/\u0000-\u001f\u007f-\u009f]/u;
function checkName(name, what) {
  if (typeof name !== 'string' || name.length < 1 || name.length > 80 || FORBIDDEN_NAME.test(name)) {
    throw new ApiError('InvalidName', `Invalid ${what} name: '${name}'`);
  }
}

function withTaskTimeouts(def) {
  const copy = structuredClone(def);
  const walk = (d) => {
    for (const st of Object.values(d.States ?? {})) {
      if (st.Type === 'Task' && st.TimeoutSeconds === undefined && st.TimeoutSecondsPath === undefined) {
        st.TimeoutSeconds = NO_TASK_TIMEOUT_SECONDS;
      }
      if (st.Type === 'Map') walk(st.ItemProcessor ?? st.Iterator);
      if (st.Type === 'Parallel') st.Branches.forEach(walk);
    }
  };
  walk(copy);
  return copy;
}

// scaleRetries multiplies every retrier's IntervalSeconds (default 1) and MaxDelaySeconds by
// --retry-interval-scale.
function scaleRetries(def, scale) {
  if (scale === 1) return def;
  const copy = structuredClone(def);
  const walk = (d) => {
    for (const st of Object.values(d.States ?? {})) {
      for (const r of st.Retry ?? []) {
        r.IntervalSeconds = (r.IntervalSeconds ?? 1) * scale;
        if (r.MaxDelaySeconds !== undefined) r.MaxDelaySeconds *= scale;
      }
      if (st.Type === 'Map') walk(st.ItemProcessor ?? st.Iterator);
      if (st.Type === 'Parallel') st.Branches.forEach(walk);
    }
  };
  walk(copy);
  return copy;
}

// functionNameOf is the function name of a name or ARN (arn:aws:lambda:R:A:function:NAME[:QUALIFIER]).
function functionNameOf(s) {
  const m = /^arn:[^:]+:lambda:[^:]*:[^:]*:function:([^:]+)/.exec(s);
  return m ? m[1] : s;
}

function taskStates(def, out = {}) {
  for (const [name, st] of Object.entries(def.States ?? {})) {
    if (st.Type === 'Task') {
      if (out[name] && out[name].Resource !== st.Resource) {
        throw new ApiError('InvalidDefinition', `Task state name ${name} is used twice with different resources`);
      }
      out[name] = st;
    }
    if (st.Type === 'Map') taskStates(st.ItemProcessor ?? st.Iterator, out);
    if (st.Type === 'Parallel') st.Branches.forEach((b) => taskStates(b, out));
  }
  return out;
}

// ---- Task handlers -------------------------------------------------------------------------------

// invokeLambda calls the Lambda Invoke API (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html)
// and names a failure as Step Functions does:
//   - an API error is "Lambda." + its exception name: 429 TooManyRequestsException becomes
//     Lambda.TooManyRequestsException (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html);
//   - a function error (X-Amz-Function-Error: Unhandled) is named by the errorType of the returned
//     payload (a handler's error, Sandbox.Timedout for a function timeout); when the payload has no
//     errorType (the process was killed or crashed without a response) it is Lambda.Unknown:
//     "Unhandled errors in Lambda are reported as Lambda.Unknown in the error output. These include
//     out-of-memory errors and function timeouts." (same page).
//
// With --lambda-client-timeout, an Invoke of the function that has not answered in time fails with
// Lambda.ClientExecutionTimeoutException, the error Step Functions reports when its own Invoke call
// times out; the invocation is not cancelled (Lambda runs it to its end or its timeout) and its
// answer is dropped (https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html).
async function invokeLambda(functionName, payload) {
  const call = invokeOnce(functionName, payload);
  const ms = clientTimeouts.get(functionNameOf(functionName));
  if (ms === undefined) return call;
  call.catch(() => {}); // a late failure of an abandoned call is nobody's
  let timer;
  const gaveUp = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TaskError('Lambda.ClientExecutionTimeoutException',
      `Client execution did not complete before the specified timeout configuration: ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([call, gaveUp]);
  } finally {
    clearTimeout(timer);
  }
}

async function invokeOnce(functionName, payload) {
  const url = `${args['lambda-endpoint']}/2015-03-31/functions/${encodeURIComponent(functionName)}/invocations`;
  let res;
  try {
    res = await fetch(url, { method: 'POST', body: JSON.stringify(payload ?? null) });
  } catch (e) {
    throw new TaskError('Lambda.SdkClientException', `local Lambda endpoint unreachable: ${e.message}`);
  }
  const text = await res.text();
  if (res.status >= 300) {
    let type = res.headers.get('x-amzn-errortype')?.split(':')[0];
    if (!type) type = res.status === 429 ? 'TooManyRequestsException' : res.status === 404 ? 'ResourceNotFoundException' : 'ServiceException';
    throw new TaskError(`Lambda.${type}`, text);
  }
  let body = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = text;
  }
  if (res.headers.get('x-amz-function-error')) {
    const type = typeof body?.errorType === 'string' && body.errorType !== '' ? body.errorType : undefined;
    if (!type) throw new TaskError('Lambda.Unknown', `The cause could not be determined because Lambda did not return an error type. Returned payload: ${text}`);
    throw new TaskError(type, text);
  }
  return body;
}

// One Task attempt writes these events (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html):
// service integrations TaskScheduled, TaskStarted, [TaskSubmitted for .sync], TaskSucceeded|TaskFailed;
// a plain Lambda ARN LambdaFunctionScheduled, LambdaFunctionStarted, LambdaFunctionSucceeded|Failed.
function taskHandler(exec, st) {
  const resource = st.Resource;
  if (resource.startsWith('arn:aws:states:::lambda:invoke')) {
    const detail = { resourceType: 'lambda', resource: resource.slice('arn:aws:states:::lambda:'.length) };
    return async (input) => {
      addEvent(exec, 'TaskScheduled', { taskScheduledEventDetails: { ...detail, region: args.region, parameters: data(input) } });
      addEvent(exec, 'TaskStarted', { taskStartedEventDetails: detail });
      try {
        const payload = await invokeLambda(input.FunctionName, input.Payload);
        const out = { ExecutedVersion: '$LATEST', Payload: payload, StatusCode: 200 };
        addEvent(exec, 'TaskSucceeded', { taskSucceededEventDetails: { ...detail, output: data(out) } });
        return out;
      } catch (e) {
        addEvent(exec, 'TaskFailed', { taskFailedEventDetails: { ...detail, error: e.name, cause: e.message } });
        throw e;
      }
    };
  }
  if (/^arn:aws:lambda:/.test(resource)) {
    return async (input) => {
      addEvent(exec, 'LambdaFunctionScheduled', { lambdaFunctionScheduledEventDetails: { resource, input: data(input) } });
      addEvent(exec, 'LambdaFunctionStarted', {});
      try {
        const r = await invokeLambda(resource, input);
        addEvent(exec, 'LambdaFunctionSucceeded', { lambdaFunctionSucceededEventDetails: { output: data(r) } });
        return r;
      } catch (e) {
        addEvent(exec, 'LambdaFunctionFailed', { lambdaFunctionFailedEventDetails: { error: e.name, cause: e.message } });
        throw e;
      }
    };
  }
  const sfn = /^arn:aws:states:::states:(startExecution(\.sync(:2)?)?)$/.exec(resource);
  if (sfn) {
    const sync = sfn[2] !== undefined;
    const v2 = sfn[3] !== undefined;
    const detail = { resourceType: 'states', resource: sfn[1] };
    return async (input) => {
      addEvent(exec, 'TaskScheduled', { taskScheduledEventDetails: { ...detail, region: args.region, parameters: data(input) } });
      addEvent(exec, 'TaskStarted', { taskStartedEventDetails: detail });
      let child;
      try {
        const childInput = typeof input.Input === 'string' ? input.Input : JSON.stringify(input.Input ?? {});
        child = startExecution({ stateMachineArn: input.StateMachineArn, name: input.Name, input: childInput }, exec);
        // --lose-child-start-answers: the child exists, but the task sees an SDK client error, as
        // when the StartExecution answer is lost. A Retry with the same name then finds the child
        // while it runs (StartExecution is idempotent for a running execution's name and input).
        if (loseChildStartAnswers > 0 && !lostStartAnswers.has(child.executionArn)) {
          loseChildStartAnswers -= 1;
          lostStartAnswers.add(child.executionArn);
          throw new ApiError('SdkClient', `Unable to execute HTTP request: Read timed out (the start of ${child.executionArn} succeeded; its answer was lost)`);
        }
      } catch (e) {
        const error = e instanceof ApiError ? `StepFunctions.${e.type}Exception` : 'States.TaskFailed';
        addEvent(exec, 'TaskFailed', { taskFailedEventDetails: { ...detail, error, cause: e.message } });
        throw new TaskError(error, e.message);
      }
      // The StartExecution answer, as the task's TaskSubmitted (.sync) or TaskSucceeded output.
      const started = { ExecutionArn: child.executionArn, StartDate: child.startDate };
      if (!sync) {
        addEvent(exec, 'TaskSucceeded', { taskSucceededEventDetails: { ...detail, output: JSON.stringify(started) } });
        return started;
      }
      addEvent(exec, 'TaskSubmitted', { taskSubmittedEventDetails: { ...detail, output: JSON.stringify(started), outputDetails: { truncated: false } } });
      await child.done;
      const d = describe(child);
      const out = {
        ExecutionArn: d.executionArn,
        Input: v2 ? JSON.parse(d.input) : d.input,
        InputDetails: { Included: true },
        Name: d.name,
        Output: d.output === undefined ? undefined : v2 ? JSON.parse(d.output) : d.output,
        OutputDetails: { Included: true },
        StartDate: child.startDate,
        StateMachineArn: d.stateMachineArn,
        Status: d.status,
        StopDate: child.stopDate,
      };
      if (child.status !== 'SUCCEEDED') {
        const cause = JSON.stringify({ ...out, Error: child.error, Cause: child.cause });
        addEvent(exec, 'TaskFailed', { taskFailedEventDetails: { ...detail, error: 'States.TaskFailed', cause: data(cause) } });
        throw new TaskError('States.TaskFailed', cause);
      }
      addEvent(exec, 'TaskSucceeded', { taskSucceededEventDetails: { ...detail, output: data(out) } });
      return out;
    };
  }
  return async () => {
    const detail = { resourceType: 'unknown', resource };
    addEvent(exec, 'TaskScheduled', { taskScheduledEventDetails: { ...detail, region: args.region, parameters: '{}' } });
    addEvent(exec, 'TaskStarted', { taskStartedEventDetails: detail });
    const cause = `sfn-server: unsupported Task resource ${resource}`;
    addEvent(exec, 'TaskFailed', { taskFailedEventDetails: { ...detail, error: 'States.Runtime', cause } });
    throw new TaskError('States.Runtime', cause);
  };
}

// ---- History -----------------------------------------------------------------------------------

// Data fields of history events (input, output, parameters) are kept whole, as AWS keeps them:
// GetExecutionHistory's <field>Details.truncated is "Always false for API calls"
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEventExecutionDataDetails.html),
// and no state payload can exceed the 256 KiB quota. Only a field over that bound, which AWS would
// have failed with States.DataLimitExceeded first, is kept as its first 256 Ki characters and
// marked truncated, so a run that goes wrong cannot exhaust the server's memory. A 1,000-chunk
// segment with a 16,000-byte header (TestScenarioWideSegment) holds tens of MB of history this way.
const MAX_EVENT_DATA = MAX_PAYLOAD_BYTES;
const TRUNCATED = Symbol('truncated');

function data(v) {
  const s = typeof v === 'string' ? v : JSON.stringify(v ?? null);
  const whole = s.length <= MAX_EVENT_DATA && Buffer.byteLength(s) <= MAX_EVENT_DATA;
  const t = new String(whole ? s : s.slice(0, MAX_EVENT_DATA));
  t[TRUNCATED] = !whole;
  return t;
}

// nextSeq is the next number of the counter that patch.mjs stamps the library's events with.
const nextSeq = () => (globalThis.__localStepFunctionsSeq = (globalThis.__localStepFunctionsSeq ?? 0) + 1);

// addEvent adds one history event in the shape of the HistoryEvent API type
// (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html): type and
// the type's details; GetExecutionHistory adds id (from 1), previousEventId and timestamp. Task
// events are written by the task handlers as the task runs; state events come from the library's
// event log, which the server reads asynchronously, so each event carries the sequence number of
// the moment it happened (patch.mjs) and the list is kept in that order.
function addEvent(exec, type, details, seq = nextSeq()) {
  // Nothing follows the terminal event (a stopped execution's task handler may still return).
  if (exec.closed) return;
  const ev = { seq, timestamp: Date.now(), type, ...details };
  const list = exec.events;
  let i = list.length;
  while (i > 0 && list[i - 1].seq > seq) i--;
  list.splice(i, 0, ev);
  if (exec.events.length > MAX_HISTORY_EVENTS && exec.status === 'RUNNING' && !exec.limitFailure) {
    failOnLimit(exec, 'States.Runtime', `execution history exceeded the limit of ${MAX_HISTORY_EVENTS} events`);
  }
}

function eventForAPI(ev, id) {
  const out = { id, previousEventId: id - 1 };
  for (const [k, v] of Object.entries(ev)) {
    if (k === 'seq') continue;
    if (k === 'timestamp') {
      out[k] = v / 1000;
    } else if (k.endsWith('EventDetails') && v && typeof v === 'object') {
      const d = {};
      for (const [f, x] of Object.entries(v)) {
        if (x instanceof String) {
          d[f] = String(x);
          // AWS's HistoryEventExecutionDataDetails go with input and output only.
          if (f === 'input' || f === 'output') d[`${f}Details`] = { truncated: x[TRUNCATED] === true };
        } else {
          d[f] = x;
        }
      }
      out[k] = d;
    } else {
      out[k] = v;
    }
  }
  return out;
}

// AWS's event type of a state entered/exited: <Type>StateEntered, e.g. TaskStateEntered, MapStateExited.
const stateEvent = (state, what) => `${state.type}State${what}`;

// Writes the history events AWS writes for one event of the library's log. The library reports state
// entry, exit and failure; AWS additionally writes MapStateStarted after MapStateEntered and
// MapStateSucceeded before MapStateExited, and MapStateFailed when an iteration fails. Task events
// are written in taskHandler, and the execution's terminal event in finish. StateRetried and
// StateCaught have no history event of their own.
function countEvent(exec, ev) {
  const seq = ev.localSeq ?? nextSeq();
  countTransition(exec, ev);
  switch (ev.type) {
    case 'ExecutionStarted':
      addEvent(exec, 'ExecutionStarted', { executionStartedEventDetails: { input: data(exec.input), roleArn: machines.get(exec.stateMachineArn)?.roleArn } }, seq);
      break;
    case 'StateEntered':
      addEvent(exec, stateEvent(ev.state, 'Entered'), { stateEnteredEventDetails: { name: ev.state.name, input: data(ev.state.input) } }, seq);
      if (ev.state.type === 'Map') addEvent(exec, 'MapStateStarted', { mapStateStartedEventDetails: {} }, seq + 0.5);
      notePayload(exec, ev.state.input);
      if (ev.index === undefined) exec.lastTopState = { name: ev.state.name, input: ev.state.input };
      break;
    case 'StateExited':
      if (ev.state.type === 'Map') addEvent(exec, 'MapStateSucceeded', {}, seq - 0.5);
      addEvent(exec, stateEvent(ev.state, 'Exited'), { stateExitedEventDetails: { name: ev.state.name, output: data(ev.state.output) } }, seq);
      notePayload(exec, ev.state.output);
      break;
    case 'StateFailed':
      if (ev.state.type === 'Map') addEvent(exec, 'MapStateFailed', {}, seq);
      break;
    case 'MapIterationStarted':
      addEvent(exec, 'MapIterationStarted', { mapIterationStartedEventDetails: { name: ev.parentState?.name, index: ev.index } }, seq);
      break;
    case 'MapIterationFailed':
      addEvent(exec, 'MapIterationFailed', { mapIterationFailedEventDetails: { name: ev.parentState?.name, index: ev.index } }, seq);
      break;
    case 'MapIterationSucceeded': {
      addEvent(exec, 'MapIterationSucceeded', { mapIterationSucceededEventDetails: { name: ev.parentState?.name, index: ev.index } }, seq);
      const name = ev.parentState?.name;
      if (!exec.mapResults.has(name)) exec.mapResults.set(name, new Map());
      exec.mapResults.get(name).set(ev.index, ev.output);
      break;
    }
    case 'ParallelBranchStarted':
    case 'ParallelBranchSucceeded':
    case 'ParallelBranchFailed':
      addEvent(exec, ev.type, {}, seq);
      break;
    default:
      // ExecutionSucceeded/Failed/Aborted/Timeout: written by finish with the final status.
      break;
  }
}

// countTransition counts the state transitions AWS bills for a Standard workflow: "Step Functions
// counts a state transition each time a step of your workflow is executed ... including retries"
// (https://aws.amazon.com/step-functions/pricing/). So every state entered counts, inside a Map
// iteration too (an inline Map iteration is not charged on its own:
// https://docs.aws.amazon.com/step-functions/latest/dg/concepts-transitions.html), and every retry of
// a state counts once more; the library re-runs a retried state without a second StateEntered, so the
// StateRetried event is counted. The start and end of an execution are not steps and are not
// counted. A redrive counts one (RedriveExecution), and the states it reruns count as entered again
// (concepts-transitions.html). Child executions count in their own execution; the harness sums them.
function countTransition(exec, ev) {
  if (exec.closed) return;
  if (ev.type === 'StateEntered' || ev.type === 'StateRetried') exec.stateTransitions += 1;
}

// mapCollector counts one Map run's collected iteration results against the payload limit. A Map
// state's result is the array of its iterations' outputs, and only then do ResultSelector and
// ResultPath apply ("The Map state's output is an array of results":
// https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html), so the array is a state
// payload of its own, bound by the 256 KiB quota (service-quotas.html) even when ResultPath discards
// it. Returns a function called with each iteration's result (in any order); it returns false once
// the array is over the limit, after failing the execution with States.DataLimitExceeded.
function mapCollector(exec, stateName) {
  let bytes = 2; // []
  let n = 0;
  return (result) => {
    bytes += payloadBytes(result ?? null) + (n > 0 ? 1 : 0);
    n += 1;
    if (bytes > exec.maxPayloadBytes) exec.maxPayloadBytes = bytes;
    if (bytes > MAX_PAYLOAD_BYTES) {
      if (exec.status === 'RUNNING' && !exec.limitFailure) {
        failOnLimit(exec, 'States.DataLimitExceeded', `the results of Map state ${stateName} (${n} iterations, ${bytes} bytes) exceed the payload limit of ${MAX_PAYLOAD_BYTES} bytes`);
      }
      return false;
    }
    return true;
  };
}

function notePayload(exec, value) {
  const n = payloadBytes(value);
  if (n > exec.maxPayloadBytes) exec.maxPayloadBytes = n;
  if (n > MAX_PAYLOAD_BYTES && exec.status === 'RUNNING' && !exec.limitFailure) {
    failOnLimit(exec, 'States.DataLimitExceeded', `state payload of ${n} bytes exceeds the limit of ${MAX_PAYLOAD_BYTES}`);
  }
}

function failOnLimit(exec, error, cause) {
  exec.limitFailure = { error, cause };
  exec.abort?.();
}

// ---- Executions --------------------------------------------------------------------------------

// emitStatus sends the execution's "Step Functions Execution Status Change" event to the harness's
// EventBridge routing. Step Functions sends one to the default bus for every status change of a
// Standard workflow's execution (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED; a redrive is
// RUNNING again); detail carries executionArn, stateMachineArn, name, status, startDate and
// stopDate in epoch milliseconds, input and output
// (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html,
// https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-states.html). Delivery is best
// effort; the harness, not this server, drops or duplicates events.
function emitStatus(exec) {
  const url = args['events-endpoint'];
  if (!url) return;
  const terminal = exec.status !== 'RUNNING';
  const redrivable = ['FAILED', 'ABORTED', 'TIMED_OUT'].includes(exec.status);
  const event = {
    version: '0',
    id: crypto.randomUUID(),
    'detail-type': 'Step Functions Execution Status Change',
    source: 'aws.states',
    account: args.account,
    time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    region: args.region,
    resources: [exec.executionArn],
    detail: {
      executionArn: exec.executionArn,
      stateMachineArn: exec.stateMachineArn,
      name: exec.name,
      status: exec.status,
      startDate: exec.startDate,
      stopDate: terminal ? exec.stopDate ?? Date.now() : null,
      input: exec.input,
      inputDetails: { included: true },
      output: exec.status === 'SUCCEEDED' ? exec.output ?? null : null,
      outputDetails: exec.status === 'SUCCEEDED' ? { included: true } : null,
      error: exec.error ?? null,
      cause: exec.cause ?? null,
      stateMachineVersionArn: null,
      stateMachineAliasArn: null,
      redriveCount: exec.redriveCount,
      redriveDate: exec.redriveDate ?? null,
      redriveStatus: redrivable ? 'REDRIVABLE' : 'NOT_REDRIVABLE',
      redriveStatusReason: redrivable ? null : `Execution is ${exec.status} and cannot be redriven`,
    },
  };
  const body = JSON.stringify(event);
  const post = (attempt) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).catch((e) => {
      if (attempt < 3) setTimeout(() => post(attempt + 1), 100);
      else console.error(`sfn-server: status event not delivered: ${e.message ?? e}`);
    });
  post(0);
}

function executionArnOf(machine, name) {
  return `arn:aws:states:${args.region}:${args.account}:execution:${machine.name}:${name}`;
}

function startExecution({ stateMachineArn, name, input }, parent) {
  const machine = machines.get(stateMachineArn);
  if (!machine) throw new ApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${stateMachineArn}'`);
  name = name ?? crypto.randomUUID();
  checkName(name, 'execution');
  input = input ?? '{}';
  let parsed;
  try {
    parsed = JSON.parse(input);
  } catch {
    throw new ApiError('InvalidExecutionInput', 'Invalid execution input: not JSON');
  }
  if (Buffer.byteLength(input) > MAX_PAYLOAD_BYTES) throw new ApiError('InvalidExecutionInput', 'input exceeds 256 KiB');
  const arn = executionArnOf(machine, name);
  const existing = executions.get(arn);
  if (existing) {
    // Same name, still running, same input: success without a new execution; anything else is
    // ExecutionAlreadyExists (API_StartExecution.html).
    if (existing.status === 'RUNNING' && existing.input === input) return existing;
    throw new ApiError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
  }
  const exec = {
    executionArn: arn,
    stateMachineArn,
    name,
    input,
    status: 'RUNNING',
    startDate: Date.now(),
    events: [],
    maxPayloadBytes: payloadBytes(parsed),
    redriveCount: 0,
    stateTransitions: 0,
    parentArn: parent?.executionArn,
    children: [],
    mapResults: new Map(),
  };
  executions.set(arn, exec);
  parent?.children.push(exec);
  run(exec, machine.definition, parsed, false);
  emitStatus(exec);
  return exec;
}

function run(exec, definition, input, redrive) {
  const machine = machines.get(exec.stateMachineArn);
  const handlers = {};
  for (const [name, st] of Object.entries(taskStates(definition))) handlers[name] = taskHandler(exec, st);
  const sm = new StateMachine(definition, { validationOptions: { noValidate: true } });
  const previous = redrive ? exec.mapResults : new Map();
  // Hooks of patch.mjs inside the library's Map state.
  const localRedrive = {
    succeeded: (state, i) => previous.get(state)?.has(i) ?? false,
    result: (state, i) => previous.get(state).get(i),
    collector: (state) => mapCollector(exec, state),
  };
  exec.mapResults = new Map(previous);
  exec.limitFailure = undefined;
  const execution = sm.run(input, {
    overrides: { taskResourceLocalHandlers: handlers },
    localRedrive,
    context: {
      Execution: { Id: exec.executionArn, Name: exec.name, RoleArn: machine.roleArn, RedriveCount: exec.redriveCount },
      StateMachine: { Id: machine.arn, Name: machine.name },
    },
  });
  exec.abort = execution.abort;
  const logs = (async () => {
    let first = true;
    for await (const ev of execution.eventLogs) {
      // A redriven execution continues its history: ExecutionRedriven instead of a second ExecutionStarted.
      if (first && redrive && ev.type === 'ExecutionStarted') {
        // (ExecutionRedriven was written by RedriveExecution.)
        first = false;
        continue;
      }
      first = false;
      countEvent(exec, ev);
    }
  })();
  exec.done = Promise.allSettled([execution.result, logs]).then(([r]) => {
    exec.stopDate = Date.now();
    exec.abort = undefined;
    if (exec.limitFailure) {
      // A limit can be noticed after the library has finished (history and payloads are read from its
      // asynchronous event log); the execution fails all the same.
      finish(exec, 'FAILED', exec.limitFailure.error, exec.limitFailure.cause);
      return;
    }
    if (r.status === 'fulfilled') {
      const output = JSON.stringify(r.value);
      if (Buffer.byteLength(output) > MAX_PAYLOAD_BYTES) {
        finish(exec, 'FAILED', 'States.DataLimitExceeded', 'execution output exceeds 256 KiB');
      } else {
        exec.output = output;
        finish(exec, 'SUCCEEDED');
      }
      return;
    }
    const err = r.reason;
    if (err instanceof ExecutionAbortedError) {
      finish(exec, 'ABORTED', exec.stopError?.error, exec.stopError?.cause);
    } else if (err instanceof ExecutionTimeoutError) {
      finish(exec, 'TIMED_OUT', 'States.Timeout', 'execution timed out');
    } else {
      const cause = err.cause ?? err;
      finish(exec, 'FAILED', cause.name ?? 'States.Runtime', cause.message ?? String(cause));
    }
  });
}

// The terminal event of each status (HistoryEvent types).
const TERMINAL = {
  SUCCEEDED: (e) => ['ExecutionSucceeded', { executionSucceededEventDetails: { output: data(e.output) } }],
  FAILED: (e) => ['ExecutionFailed', { executionFailedEventDetails: { error: e.error, cause: e.cause } }],
  ABORTED: (e) => ['ExecutionAborted', { executionAbortedEventDetails: { error: e.error, cause: e.cause } }],
  TIMED_OUT: (e) => ['ExecutionTimedOut', { executionTimedOutEventDetails: { error: e.error, cause: e.cause } }],
};

// finish records the end of an execution. A stopped or failed parent stops its running children:
// for a task of the "Run a Job (.sync)" pattern AWS attempts to stop the job on a best-effort basis
// (https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html); the local server
// always stops the child. Lambda invocations already running are not stopped, here as on AWS: their
// HTTP call to the Lambda Invoke API completes in the background and its result is dropped.
function finish(exec, status, error, cause) {
  exec.status = status;
  exec.error = error;
  exec.cause = cause;
  const [type, details] = TERMINAL[status](exec);
  addEvent(exec, type, details);
  exec.closed = true;
  emitStatus(exec);
  if (status !== 'SUCCEEDED') for (const c of exec.children) if (c.status === 'RUNNING') stop(c, 'States.Aborted', 'parent stopped');
}

function stop(exec, error, cause) {
  exec.stopError = { error, cause };
  exec.abort?.();
}

function describe(exec) {
  const redrivable = ['FAILED', 'ABORTED', 'TIMED_OUT'].includes(exec.status);
  return {
    executionArn: exec.executionArn,
    stateMachineArn: exec.stateMachineArn,
    name: exec.name,
    status: exec.status,
    startDate: seconds(exec.startDate),
    stopDate: exec.status === 'RUNNING' ? undefined : seconds(exec.stopDate),
    input: exec.input,
    inputDetails: { included: true },
    output: exec.output,
    outputDetails: exec.output === undefined ? undefined : { included: true },
    error: exec.error,
    cause: exec.cause,
    redriveCount: exec.redriveCount,
    redriveDate: seconds(exec.redriveDate),
    redriveStatus: redrivable ? 'REDRIVABLE' : 'NOT_REDRIVABLE',
    redriveStatusReason: redrivable ? undefined : `Execution is ${exec.status}`,
  };
}

function getExecution(arn) {
  const exec = executions.get(arn);
  if (!exec) throw new ApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${arn}'`);
  return exec;
}

// ---- API ---------------------------------------------------------------------------------------

const operations = {
  CreateStateMachine(req) {
    checkName(req.name, 'state machine');
    const arn = `arn:aws:states:${args.region}:${args.account}:stateMachine:${req.name}`;
    let definition;
    try {
      definition = JSON.parse(req.definition);
      // Validates the definition with asl-validator, as the library does by default.
      new StateMachine(definition, { validationOptions: { checkArn: true, checkPaths: true } });
      taskStates(definition);
    } catch (e) {
      throw new ApiError('InvalidDefinition', String(e.message ?? e));
    }
    if (machines.has(arn)) throw new ApiError('StateMachineAlreadyExists', `State Machine Already Exists: '${arn}'`);
    machines.set(arn, { arn, name: req.name, roleArn: req.roleArn, type: req.type ?? 'STANDARD', definition: scaleRetries(withTaskTimeouts(definition), retryIntervalScale), created: Date.now() });
    return { stateMachineArn: arn, creationDate: Date.now() / 1000 };
  },
  StartExecution(req) {
    const exec = startExecution({ stateMachineArn: req.stateMachineArn, name: req.name, input: req.input });
    return { executionArn: exec.executionArn, startDate: seconds(exec.startDate) };
  },
  DescribeExecution(req) {
    return describe(getExecution(req.executionArn));
  },
  ListExecutions(req) {
    if (!machines.has(req.stateMachineArn)) throw new ApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${req.stateMachineArn}'`);
    const all = [...executions.values()]
      .filter((e) => e.stateMachineArn === req.stateMachineArn && (!req.statusFilter || e.status === req.statusFilter))
      .sort((a, b) => b.startDate - a.startDate);
    const max = Math.min(req.maxResults || 100, 1000);
    const from = req.nextToken ? Number(req.nextToken) : 0;
    const page = all.slice(from, from + max).map((e) => {
      const d = describe(e);
      return { executionArn: d.executionArn, stateMachineArn: d.stateMachineArn, name: d.name, status: d.status, startDate: d.startDate, stopDate: d.stopDate, redriveCount: d.redriveCount, redriveDate: d.redriveDate };
    });
    return { executions: page, nextToken: from + max < all.length ? String(from + max) : undefined };
  },
  // GetExecutionHistory (https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html):
  // maxResults 1–1000 (default 100), reverseOrder, nextToken. The token is the id of the next event
  // to return, so pages stay stable while the execution appends events.
  GetExecutionHistory(req) {
    const exec = getExecution(req.executionArn);
    const max = req.maxResults ? Number(req.maxResults) : 100;
    if (!Number.isInteger(max) || max < 0 || max > 1000) throw new ApiError('ValidationException', 'maxResults must be between 0 and 1000');
    const n = exec.events.length;
    let from;
    if (req.nextToken) {
      from = Number(req.nextToken);
      if (!Number.isInteger(from) || from < 1 || from > n) throw new ApiError('InvalidToken', `Invalid Token: '${req.nextToken}'`);
    } else {
      from = req.reverseOrder ? n : 1;
    }
    const size = max === 0 ? 100 : max;
    const page = [];
    let id = from;
    for (; page.length < size && id >= 1 && id <= n; id += req.reverseOrder ? -1 : 1) page.push(eventForAPI(exec.events[id - 1], id));
    return { events: page, nextToken: id >= 1 && id <= n ? String(id) : undefined };
  },
  StopExecution(req) {
    const exec = getExecution(req.executionArn);
    if (exec.status === 'RUNNING') stop(exec, req.error, req.cause);
    return { stopDate: Date.now() / 1000 };
  },
  RedriveExecution(req) {
    const exec = getExecution(req.executionArn);
    if (!['FAILED', 'ABORTED', 'TIMED_OUT'].includes(exec.status) || !exec.lastTopState) {
      throw new ApiError('ExecutionNotRedrivable', `Execution is not redrivable: ${exec.status}`);
    }
    const machine = machines.get(exec.stateMachineArn);
    exec.status = 'RUNNING';
    exec.redriveCount += 1;
    exec.redriveDate = Date.now();
    exec.error = exec.cause = exec.output = exec.stopDate = exec.stopError = undefined;
    exec.closed = false;
    exec.stateTransitions += 1; // "When you redrive an execution, it's considered as a state transition" (concepts-transitions.html)
    addEvent(exec, 'ExecutionRedriven', { executionRedrivenEventDetails: { redriveCount: exec.redriveCount } });
    // Continue at the top-level state that did not complete, with the input it had.
    const from = exec.lastTopState;
    run(exec, { ...machine.definition, StartAt: from.name }, from.input, true);
    emitStatus(exec);
    return { redriveDate: exec.redriveDate / 1000 };
  },
};

// Harness-only operations (target prefix LocalStepFunctions.): the measurements a real account would
// read from GetExecutionHistory and CloudWatch.
const localOperations = {
  Stats() {
    return {
      apiCalls,
      executions: [...executions.values()].map((e) => ({
        executionArn: e.executionArn,
        stateMachineArn: e.stateMachineArn,
        name: e.name,
        status: e.status,
        startDate: seconds(e.startDate),
        stopDate: seconds(e.stopDate),
        historyEvents: e.events.length,
        stateTransitions: e.stateTransitions,
        maxPayloadBytes: e.maxPayloadBytes,
        parentArn: e.parentArn,
        redriveCount: e.redriveCount,
        error: e.error,
        cause: e.cause,
      })),
    };
  },
};

function send(res, status, body, errorType) {
  const text = JSON.stringify(body ?? {});
  const headers = { 'content-type': 'application/x-amz-json-1.0', 'content-length': Buffer.byteLength(text) };
  if (errorType) headers['x-amzn-errortype'] = errorType;
  res.writeHead(status, headers);
  res.end(text);
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const target = String(req.headers['x-amz-target'] ?? '');
    const [service, op] = target.split('.');
    const table = service === 'AWSStepFunctions' ? operations : service === 'LocalStepFunctions' ? localOperations : undefined;
    const fn = table && Object.hasOwn(table, op) ? table[op] : undefined;
    if (!fn) {
      send(res, 400, { __type: 'UnknownOperationException', message: `unknown operation ${target}` }, 'UnknownOperationException');
      return;
    }
    if (service === 'AWSStepFunctions') apiCalls[op] = (apiCalls[op] ?? 0) + 1;
    try {
      const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
      send(res, 200, fn(body));
    } catch (e) {
      if (e instanceof ApiError) {
        send(res, e.status, { __type: e.type, message: e.message }, e.type);
      } else {
        console.error(`sfn-server: ${op}: ${e.stack ?? e}`);
        send(res, 500, { __type: 'InternalFailure', message: String(e.message ?? e) }, 'InternalFailure');
      }
    }
  });
});

server.listen(Number(args.port), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
// The harness closes stdin when it exits; never outlive it.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
