// The local API Gateway's mapping-template renderer as a server, for the Go harness: POST / with
// {"template": "...", "request": {"body", "path", "querystring", "header", "context", "stageVariables"}}
// answers 200 {"output": "..."}, or 400 {"__type": "UnsupportedTemplate" | "TemplateError", "message"}.
// The first line on stdout is {"port": N}.
import { createServer } from 'node:http';
import { render, UnsupportedError } from './render.mjs';

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    try {
      const { template, request } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      send(res, 200, { output: render(String(template ?? ''), request ?? {}) });
    } catch (e) {
      send(res, 400, { __type: e instanceof UnsupportedError ? 'UnsupportedTemplate' : 'TemplateError', message: String(e.message ?? e) });
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
// The harness closes stdin when it exits; never outlive it.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
