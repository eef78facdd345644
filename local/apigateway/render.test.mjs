// Tests of the local mapping-template renderer against API Gateway's reference and examples.
// Run: node --test local/apigateway/ (internal/localrun's TestAPIGatewayRender runs it in make test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { render, formEncode, escapeJavaScript, UnsupportedError } from './render.mjs';

const event = JSON.stringify({
  id: '7bf73129-1428-4cd3-a780-95db273d1602',
  source: 'aws.s3',
  detail: { bucket: { name: 'ingest' }, object: { key: 'pools/default/t-01/a+b%C3%A9.csv', size: 12 } },
});

test('$input.path, $input.json and $input.body', () => {
  const cases = [
    ["$input.path('$.detail.object.key')", 'pools/default/t-01/a+b%C3%A9.csv'],
    ["$input.path('$.detail.object.size')", '12'],
    ["$input.json('$.detail.bucket')", '{"name":"ingest"}'],
    ["$input.json('$.detail.object.key')", '"pools/default/t-01/a+b%C3%A9.csv"'],
    ["$input.path('$.detail.bucket').name", 'ingest'],
    ['$input.body', event],
  ];
  for (const [tpl, want] of cases) assert.equal(render(tpl, { body: event }), want, tpl);
});

test('$input.params searches path, query string and header in that order', () => {
  const req = { path: { id: 'p' }, querystring: { id: 'q', q: 'only-q' }, header: { id: 'h', h: 'only-h' } };
  assert.equal(render("$input.params('id') $input.params('q') $input.params('h') [$input.params('none')]", req), 'p only-q only-h []');
  assert.equal(render("$input.params().header.h", req), 'only-h');
});

test('$util as the reference describes it', () => {
  const cases = [
    ["$util.urlEncode('a b&c=d/é*~')", 'a+b%26c%3Dd%2F%C3%A9*%7E'],
    ["$util.urlDecode('a+b%26c')", 'a b&c'],
    ["$util.base64Encode('hello')", 'aGVsbG8='],
    ["$util.base64Decode('aGVsbG8=')", 'hello'],
    ["$util.escapeJavaScript(\"it's \\\"q\\\"\")", "it\\'s \\\"q\\\""],
    ["$util.parseJson('{\"a\":{\"b\":3}}').a.b", '3'],
  ];
  for (const [tpl, want] of cases) assert.equal(render(tpl), want, tpl);
  assert.equal(formEncode('~'), '%7E');
  assert.equal(escapeJavaScript('a/b\n\u00e9'), 'a\\/b\\n\\u00E9');
});

test('$context and $stageVariables', () => {
  const req = { context: { requestId: 'r-1', stage: 'prod', identity: { userArn: 'arn:aws:sts::1:assumed-role/R/s' } }, stageVariables: { queue: 'q.fifo' } };
  assert.equal(render('$context.requestId $context.stage $context.identity.userArn $stageVariables.queue', req), 'r-1 prod arn:aws:sts::1:assumed-role/R/s q.fifo');
});

test('Java string methods a template may call', () => {
  const cases = [
    ["#set($k = 'a/b//c//')$k.split('/').size() $k.split('/').get(1) $k.split('/')[3]", '4 b c'],
    ["#set($k = 'abcdef')$k.length() $k.substring(2) $k.substring(1, 3) $k.indexOf('cd') $k.contains('de') $k.equals('abcdef')", '6 cdef bc 2 true true'],
    ["#set($k = 'abc')#if($k.length() > 2)long#{else}short#end", 'long'],
  ];
  for (const [tpl, want] of cases) assert.equal(render(tpl), want, tpl);
});

test('what the local renderer cannot answer as AWS would fails with its name', () => {
  for (const [tpl, named] of [
    ["#set($k = 'a.b')$k.split('.')", 'String.split'],
    ["#set($k = 'abc')$k.replace('a', 'b')", 'String.replace'],
    ["#set($k = 'abc')$k.matches('a.*')", 'String.matches'],
  ]) {
    assert.throws(() => render(tpl), (e) => e instanceof UnsupportedError && e.message.includes(named), tpl);
  }
  assert.throws(() => render("$input.path('$.a')", { body: 'not json' }), UnsupportedError);
});
