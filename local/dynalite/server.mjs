// Starts dynalite (the DynamoDB emulator of the local run, npm dynalite 4.0.0) on 127.0.0.1 only,
// in memory, with tables ACTIVE at once (createTableMs 0: dynalite otherwise keeps a new table
// CREATING for 500 ms). Prints one JSON line {"port": N} on stdout when listening. Exits when stdin
// closes, so it never outlives the harness.
// dynalite is CommonJS; createRequire resolves it from the project's node_modules (or NODE_PATH).
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({ options: { port: { type: 'string', default: '0' } } });
const require = createRequire(import.meta.url);
const dynalite = require('dynalite');

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(Number(args.port), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});

// An error of one request must not take the table down with it: log it (run.log) and go on.
process.on('uncaughtException', (err) => console.error('dynalite: uncaught', err));

const close = () => server.close(() => process.exit(0));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, close);
process.stdin.on('end', close);
process.stdin.resume();
