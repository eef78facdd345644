// Loader hook that corrects one behaviour of aws-local-stepfunctions 3.0.0 where it differs from AWS.
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
  '    const processedItemsPromise = items.map(\n' +
  '      (item, i) => limit(() => {\n' +
  '        if (mapFailed.value) return Promise.resolve(null);\n' +
  '        if (redrive && redrive.succeeded(this.stateName, i)) return Promise.resolve(redrive.result(this.stateName, i));\n' +
  '        return this.processItem(iteratorStateMachine, item, input, context, i, options).catch((e) => { mapFailed.value = true; throw e; });\n' +
  '      })\n' +
  '    );';

export let patched = false;

registerHooks({
  load(url, context, nextLoad) {
    const result = nextLoad(url, context);
    if (!TARGET.test(url)) return result;
    const source = String(result.source);
    const at = source.indexOf(ANCHOR);
    if (at < 0 || source.indexOf(ANCHOR, at + 1) >= 0) {
      throw new Error('sfn-server: aws-local-stepfunctions Map code changed; update local/sfn-server/patch.mjs');
    }
    patched = true;
    return { ...result, source: source.replace(ANCHOR, REPLACEMENT), shortCircuit: true };
  },
});
