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
const { SqsStore, SqsQueue } = await load('sqs/sqsStore.js');

// ReceiveMessage on a FIFO queue, as SQS answers it: "returns as many messages with the same message
// group ID as possible", and may add messages of other available groups
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html).
// fauxqs 2.4 takes the head message of each unlocked group instead, so a batch of 10 from one group
// came back as one message, and 10 groups' heads filled one batch: Lambda's pollers could neither
// batch a group nor spread the groups over invocations. Its own dequeue, asked for one message at a
// time, takes the head of the first unlocked group in order and locks that group; unlocking the
// group between calls lets the next call take the same group's next message, until the group is
// empty and the next group's head follows.
const dequeueHead = SqsQueue.prototype.dequeueFifo;
SqsQueue.prototype.dequeueFifo = function (maxCount, visibilityTimeout, dlqResolver) {
  const out = [];
  let group;
  while (out.length < Math.min(maxCount, 10)) {
    const held = group === undefined ? 0 : (this.fifoLockedGroups.get(group) ?? 0);
    if (group !== undefined) this.fifoLockedGroups.delete(group);
    const got = dequeueHead.call(this, 1, visibilityTimeout, dlqResolver);
    if (group !== undefined) {
      const locks = held + (this.fifoLockedGroups.get(group) ?? 0);
      if (locks > 0) this.fifoLockedGroups.set(group, locks);
    }
    if (got.length === 0) break;
    out.push(...got);
    group = this.inflightMessages.get(got[0].ReceiptHandle).message.messageGroupId ?? "__default";
  }
  return out;
};
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
