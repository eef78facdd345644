// A small local Step Functions endpoint for the end-to-end runner (docs/local-run.md).
//
// It speaks the Step Functions JSON 1.0 protocol (X-Amz-Target: AWSStepFunctions.<Operation>) for the
// operations the pipeline and the harness use, and runs the state machine definitions it is given with
// aws-local-stepfunctions. Task states are answered by local handlers:
//   - arn:aws:states:::lambda:invoke and plain Lambda ARNs: the Lambda Invoke API of the Go harness
//     (--lambda-endpoint), which runs the real function binaries;
//   - arn:aws:states:::states:startExecution(.sync, .sync:2): a child execution on this same server.
//
// It counts history events the way AWS writes them (see countEvent) and measures state payloads, and
// enforces the 25,000-event and 256 KiB limits as AWS does
// (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html).
//
// Usage: node server.mjs --lambda-endpoint http://127.0.0.1:PORT [--port 0] [--region R] [--account A]
// Prints one JSON line {"port": N} on stdout when it is listening on 127.0.0.1.
import './patch.mjs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

const { StateMachine, ExecutionAbortedError, ExecutionTimeoutError } = await import('aws-local-stepfunctions');
const { patched } = await import('./patch.mjs');

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'lambda-endpoint': { type: 'string' },
    region: { type: 'string', default: 'us-east-1' },
    account: { type: 'string', default: '000000000000' },
  },
});
if (!args['lambda-endpoint']) {
  console.error('sfn-server: --lambda-endpoint is required');
  process.exit(2);
}
if (!patched) {
  console.error('sfn-server: the Map patch was not applied');
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

async function invokeLambda(functionName, payload) {
  const url = `${args['lambda-endpoint']}/2015-03-31/functions/${encodeURIComponent(functionName)}/invocations`;
  let res;
  try {
    res = await fetch(url, { method: 'POST', body: JSON.stringify(payload ?? null) });
  } catch (e) {
    throw new TaskError('Lambda.ServiceException', `local Lambda endpoint unreachable: ${e.message}`);
  }
  const text = await res.text();
  if (res.status === 429) throw new TaskError('Lambda.TooManyRequestsException', text);
  if (res.status === 404) throw new TaskError('Lambda.ResourceNotFoundException', text);
  if (res.status >= 300) throw new TaskError('Lambda.ServiceException', text);
  const body = text === '' ? null : JSON.parse(text);
  if (res.headers.get('x-amz-function-error')) {
    throw new TaskError(body?.errorType ?? 'Lambda.Unknown', text);
  }
  return body;
}

// One Task attempt writes these events (https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html):
// service integrations TaskScheduled, TaskStarted, [TaskSubmitted for .sync], TaskSucceeded|TaskFailed;
// a plain Lambda ARN LambdaFunctionScheduled, LambdaFunctionStarted, LambdaFunctionSucceeded|Failed.
function taskHandler(exec, st) {
  const resource = st.Resource;
  if (resource.startsWith('arn:aws:states:::lambda:invoke')) {
    return async (input) => {
      exec.history += 2;
      try {
        const payload = await invokeLambda(input.FunctionName, input.Payload);
        exec.history += 1;
        return { ExecutedVersion: '$LATEST', Payload: payload, StatusCode: 200 };
      } catch (e) {
        exec.history += 1;
        throw e;
      }
    };
  }
  if (/^arn:aws:lambda:/.test(resource)) {
    return async (input) => {
      exec.history += 2;
      try {
        const r = await invokeLambda(resource, input);
        exec.history += 1;
        return r;
      } catch (e) {
        exec.history += 1;
        throw e;
      }
    };
  }
  const sfn = /^arn:aws:states:::states:startExecution(\.sync(:2)?)?$/.exec(resource);
  if (sfn) {
    const sync = sfn[1] !== undefined;
    const v2 = sfn[2] !== undefined;
    return async (input) => {
      exec.history += 2;
      let child;
      try {
        const childInput = typeof input.Input === 'string' ? input.Input : JSON.stringify(input.Input ?? {});
        child = startExecution({ stateMachineArn: input.StateMachineArn, name: input.Name, input: childInput }, exec);
      } catch (e) {
        exec.history += 1;
        throw new TaskError(e instanceof ApiError ? `StepFunctions.${e.type}Exception` : 'States.TaskFailed', e.message);
      }
      if (!sync) {
        exec.history += 1;
        return { ExecutionArn: child.executionArn, StartDate: child.startDate };
      }
      exec.history += 1; // TaskSubmitted
      await child.done;
      exec.history += 1;
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
        throw new TaskError('States.TaskFailed', JSON.stringify({ ...out, Error: child.error, Cause: child.cause }));
      }
      return out;
    };
  }
  return async () => {
    exec.history += 3;
    throw new TaskError('States.Runtime', `sfn-server: unsupported Task resource ${resource}`);
  };
}

// ---- History accounting ------------------------------------------------------------------------

// Counts the history events AWS writes for one event of the library's log. The library reports state
// entry, exit and failure; AWS additionally writes MapStateStarted after MapStateEntered and
// MapStateSucceeded before MapStateExited, and MapStateFailed when an iteration fails. Task events
// are counted in taskHandler. StateRetried and StateCaught have no history event of their own.
// (Event types: https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html)
function countEvent(exec, ev) {
  switch (ev.type) {
    case 'ExecutionStarted':
      exec.history += 1;
      break;
    case 'StateEntered':
      exec.history += ev.state.type === 'Map' ? 2 : 1;
      notePayload(exec, ev.state.input);
      if (ev.index === undefined) exec.lastTopState = { name: ev.state.name, input: ev.state.input };
      break;
    case 'StateExited':
      exec.history += ev.state.type === 'Map' ? 2 : 1;
      notePayload(exec, ev.state.output);
      break;
    case 'StateFailed':
      if (ev.state.type === 'Map') exec.history += 1;
      break;
    case 'MapIterationStarted':
    case 'MapIterationFailed':
      exec.history += 1;
      break;
    case 'MapIterationSucceeded': {
      exec.history += 1;
      const name = ev.parentState?.name;
      if (!exec.mapResults.has(name)) exec.mapResults.set(name, new Map());
      exec.mapResults.get(name).set(ev.index, ev.output);
      break;
    }
    case 'ParallelBranchStarted':
    case 'ParallelBranchSucceeded':
    case 'ParallelBranchFailed':
      exec.history += 1;
      break;
    case 'ExecutionSucceeded':
    case 'ExecutionFailed':
    case 'ExecutionAborted':
    case 'ExecutionTimeout':
      exec.history += 1;
      break;
    default:
      break;
  }
  if (exec.history > MAX_HISTORY_EVENTS && exec.status === 'RUNNING' && !exec.limitFailure) {
    failOnLimit(exec, 'States.Runtime', `execution history exceeded the limit of ${MAX_HISTORY_EVENTS} events`);
  }
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
    history: 0,
    maxPayloadBytes: payloadBytes(parsed),
    redriveCount: 0,
    parentArn: parent?.executionArn,
    children: [],
    mapResults: new Map(),
  };
  executions.set(arn, exec);
  parent?.children.push(exec);
  run(exec, machine.definition, parsed, false);
  return exec;
}

function run(exec, definition, input, redrive) {
  const machine = machines.get(exec.stateMachineArn);
  const handlers = {};
  for (const [name, st] of Object.entries(taskStates(definition))) handlers[name] = taskHandler(exec, st);
  const sm = new StateMachine(definition, { validationOptions: { noValidate: true } });
  const previous = redrive ? exec.mapResults : new Map();
  const localRedrive = {
    succeeded: (state, i) => previous.get(state)?.has(i) ?? false,
    result: (state, i) => previous.get(state).get(i),
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
    if (exec.limitFailure) {
      finish(exec, 'FAILED', exec.limitFailure.error, exec.limitFailure.cause);
    } else if (err instanceof ExecutionAbortedError) {
      finish(exec, 'ABORTED', exec.stopError?.error, exec.stopError?.cause);
    } else if (err instanceof ExecutionTimeoutError) {
      finish(exec, 'TIMED_OUT', 'States.Timeout', 'execution timed out');
    } else {
      const cause = err.cause ?? err;
      finish(exec, 'FAILED', cause.name ?? 'States.Runtime', cause.message ?? String(cause));
    }
  });
}

function finish(exec, status, error, cause) {
  exec.status = status;
  exec.error = error;
  exec.cause = cause;
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
    machines.set(arn, { arn, name: req.name, roleArn: req.roleArn, type: req.type ?? 'STANDARD', definition: withTaskTimeouts(definition), created: Date.now() });
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
    exec.history += 1; // ExecutionRedriven
    exec.error = exec.cause = exec.output = exec.stopDate = exec.stopError = undefined;
    // Continue at the top-level state that did not complete, with the input it had.
    const from = exec.lastTopState;
    run(exec, { ...machine.definition, StartAt: from.name }, from.input, true);
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
        historyEvents: e.history,
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
