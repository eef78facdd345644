// Starts fauxqs (the SQS emulator of the local run) on 127.0.0.1 only. fauxqs's own startFauxqs
// listens on 0.0.0.0; the local run must stay on loopback, so this builds the same app with
// fauxqs's buildApp and listens on 127.0.0.1 itself.
// Prints one JSON line {"port": N} on stdout when listening. Exits when stdin closes.
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { port: { type: 'string', default: '0' }, region: { type: 'string', default: 'us-east-1' } } });

// fauxqs exports only startFauxqs; its build modules are loaded by file path.
const appURL = import.meta.resolve('fauxqs'); // .../fauxqs/dist/app.js
const load = (p) => import(new URL(p, appURL).href);
const { buildApp } = await load('app.js');
const { SqsStore } = await load('sqs/sqsStore.js');
const { SnsStore } = await load('sns/snsStore.js');
const { S3Store } = await load('s3/s3Store.js');

const sqsStore = new SqsStore();
sqsStore.region = args.region;
const app = buildApp({ logger: false, host: '127.0.0.1', defaultRegion: args.region, stores: { sqsStore, snsStore: new SnsStore(), s3Store: new S3Store() } });
await app.listen({ port: Number(args.port), host: '127.0.0.1' });
process.stdout.write(JSON.stringify({ port: app.server.address().port }) + '\n');

const close = () => app.close().finally(() => process.exit(0));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, close);
process.stdin.on('end', close);
process.stdin.resume();
