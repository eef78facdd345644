// Loader hook that corrects behaviours of aws-local-stepfunctions 3.0.0 where it differs from AWS.
//
// A Map state on AWS stops at its first failed iteration: the Map fails and no further iteration
// starts ("If any iteration fails, the entire Map state fails", and with MaxConcurrency 1 iterations
// run strictly in order: https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html).
// The library rejects the Map but lets p-limit start the queued iterations anyway. The patch makes
// each queued iteration check a per-Map flag that is set, synchronously, when an iteration fails,
// before p-limit can dequeue the next one.
//
// The same spot also lets a redriven execution reuse the results of iterations that succeeded in an
// earlier attempt ("RedriveExecution ... reschedules and redrives only the iterations ... that failed
// or aborted": https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html).
//
// And it hands each iteration's result to the server as it completes, so that the server counts the
// Map's collected result array against the payload limit before ResultPath discards it (see
// mapCollector in server.mjs); an iteration whose result takes the array over the limit fails the Map
// before the next iteration starts.
//
// The patch is applied to the library's source text when Node loads it; it fails loudly if the
// library no longer has the expected code, so a version bump cannot silently drop it.
import { registerHooks } from 'node:module';

const TARGET = /aws-local-stepfunctions\/build\/main\.node\.esm\.js$/;
const ANCHOR =
  '    const processedItemsPromise = items.map(\n' +
  '      (item, i) => limit(() => this.processItem(iteratorStateMachine, item, input, context, i, options))\n' +
  '    );';
const REPLACEMENT =
  '    const mapFailed = { value: false };\n' +
  '    const redrive = options.runOptions?.localRedrive;\n' +
  '    const collect = redrive?.collector?.(this.stateName);\n' +
  '    const collected = (r) => {\n' +
  '      if (collect && !collect(r)) { mapFailed.value = true; const e = new Error("Map results exceed the payload limit"); e.name = "States.DataLimitExceeded"; throw e; }\n' +
  '      return r;\n' +
  '    };\n' +
  '    const processedItemsPromise = items.map(\n' +
  '      (item, i) => limit(() => {\n' +
  '        if (mapFailed.value) return Promise.resolve(null);\n' +
  '        if (redrive && redrive.succeeded(this.stateName, i)) return Promise.resolve().then(() => collected(redrive.result(this.stateName, i)));\n' +
  '        return this.processItem(iteratorStateMachine, item, input, context, i, options).then(collected, (e) => { mapFailed.value = true; throw e; });\n' +
  '      })\n' +
  '    );';

// Second patch: every event of the library's log gets a sequence number when it is dispatched,
// from one counter that the server's own task events share, so that the server can write the
// execution history in the order things happened even though it reads the log asynchronously (and
// events of Map iterations reach it later still, forwarded by the Map state).
const LOGGER_ANCHOR =
  '  dispatch(event) {\n' +
  '    if (this.isLoggerClosed) return;\n' +
  '    this.eventQueue.push(event);';
const LOGGER_REPLACEMENT =
  '  dispatch(event) {\n' +
  '    if (this.isLoggerClosed) return;\n' +
  '    if (event.localSeq === undefined) event.localSeq = globalThis.__localStepFunctionsSeq = (globalThis.__localStepFunctionsSeq ?? 0) + 1;\n' +
  '    this.eventQueue.push(event);';

// Third patch: "ResultPath": "$" replaces the state's input with its result, as the default does
// (https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultpath.html, "Use
// ResultPath to replace the input with the result"). The library strips "$." from the path and
// then writes the result into a field literally named "$", keeping the whole input.
const RESULTPATH_ANCHOR =
  '  if (path === null) {\n' +
  '    return rawInput;\n' +
  '  }\n' +
  '  const sanitizedPath = path.replace("$.", "");';
const RESULTPATH_REPLACEMENT =
  '  if (path === null) {\n' +
  '    return rawInput;\n' +
  '  }\n' +
  '  if (path === "$") return result;\n' +
  '  const sanitizedPath = path.replace("$.", "");';

// Fourth patch: a stopped execution makes no further attempt. The library's retry wait ends early
// when the execution is aborted, and then runs the state again: a new Lambda invocation of a
// stopped execution, which AWS never makes (StopExecution "Stops an execution":
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StopExecution.html).
const RETRY_ANCHOR = '        await sleep(waitTimeBeforeRetry, options.abortSignal);\n';
const RETRY_REPLACEMENT =
  '        await sleep(waitTimeBeforeRetry, options.abortSignal);\n' +
  '        if (options.abortSignal?.aborted) throw error;\n';

// Fifth patch: States.Hash digests as AWS does. The library's own MD5 and SHA implementations pad
// the message wrongly from 56 bytes on (one 64-byte block no longer holds the message and its
// length), so every input of 56 bytes or more hashed to a wrong digest. Node's crypto computes the
// standard digests of the string's UTF-8 bytes, in lower-case hex
// (https://docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html).
const HASH_ANCHOR =
  '    switch (algorithm) {\n' +
  '      case "MD5":\n' +
  '        return md5.getDigest(str);\n';
const HASH_REPLACEMENT =
  '    return process.getBuiltinModule("node:crypto").createHash({ "MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512" }[algorithm]).update(str, "utf8").digest("hex");\n' +
  '    switch (algorithm) {\n' +
  '      case "MD5":\n' +
  '        return md5.getDigest(str);\n';

// Sixth patch, to asl-validator (which the library runs on each definition): its schema check
// builds a new Ajv and compiles the state-machine schema on every call, about 0.3 s of CPU for each
// CreateStateMachine, half of what the server spent in a burst of tenants. The patch keeps one
// compiled Ajv per set of options (checkPaths, checkArn: the formats compiled into it), so each
// later definition is only validated against it. Which definitions pass is unchanged: the schemas,
// formats and options are the same; only their compilation is shared.
const ASL_TARGET = /asl-validator\/dist\/src\/checks\/json-schema-errors\.js$/;
const AJV_ANCHOR =
  'var jsonSchemaErrors = function (definition, options) {\n' +
  '    var ajv = new ajv_1.default({\n';
const AJV_REPLACEMENT =
  'var compiledAjv = new Map();\n' +
  'var jsonSchemaErrors = function (definition, options) {\n' +
  '    var ajvKey = String(!!options.checkPaths) + "," + String(!!options.checkArn);\n' +
  '    var ajv = compiledAjv.get(ajvKey);\n' +
  '    if (!ajv) {\n' +
  '    ajv = new ajv_1.default({\n';
const AJV_VALIDATE_ANCHOR = '    ajv.validate("http://asl-validator.cloud/state-machine.json#", definition);\n';
const AJV_VALIDATE_REPLACEMENT =
  '    compiledAjv.set(ajvKey, ajv);\n' +
  '    }\n' +
  '    ajv.validate("http://asl-validator.cloud/state-machine.json#", definition);\n';

export let patched = false;
export let validatorPatched = false;

function replaceOnce(source, anchor, replacement, library = 'aws-local-stepfunctions') {
  const at = source.indexOf(anchor);
  if (at < 0 || source.indexOf(anchor, at + 1) >= 0) {
    throw new Error(`sfn-server: ${library} code changed; update local/sfn-server/patch.mjs`);
  }
  return source.replace(anchor, replacement);
}

registerHooks({
  load(url, context, nextLoad) {
    const result = nextLoad(url, context);
    if (ASL_TARGET.test(url)) {
      let source = String(result.source);
      source = replaceOnce(source, AJV_ANCHOR, AJV_REPLACEMENT, 'asl-validator');
      source = replaceOnce(source, AJV_VALIDATE_ANCHOR, AJV_VALIDATE_REPLACEMENT, 'asl-validator');
      validatorPatched = true;
      return { ...result, source, shortCircuit: true };
    }
    if (!TARGET.test(url)) return result;
    let source = String(result.source);
    source = replaceOnce(source, ANCHOR, REPLACEMENT);
    source = replaceOnce(source, LOGGER_ANCHOR, LOGGER_REPLACEMENT);
    source = replaceOnce(source, RESULTPATH_ANCHOR, RESULTPATH_REPLACEMENT);
    source = replaceOnce(source, RETRY_ANCHOR, RETRY_REPLACEMENT);
    source = replaceOnce(source, HASH_ANCHOR, HASH_REPLACEMENT);
    patched = true;
    return { ...result, source, shortCircuit: true };
  },
});
