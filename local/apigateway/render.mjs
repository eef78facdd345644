// API Gateway REST mapping templates, rendered as API Gateway renders them: Velocity (VTL, by
// velocityjs) with the $input, $util, $context and $stageVariables variables of
// https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html
//
// A template is Java's VTL in AWS; here it runs in JavaScript, so a method call on a string is
// allowed only where the two languages agree (STRING_METHODS) or where this file gives Java's
// meaning (length, contains, equals, split on a literal). Any other method call on a string fails
// the render with a message naming it, rather than answering something AWS would not.
import { Compile, parse } from 'velocityjs';
import { JSONPath } from 'jsonpath-plus';

// String methods whose JavaScript meaning is Java's for the arguments a template passes.
const STRING_METHODS = new Set(['substring', 'indexOf', 'lastIndexOf', 'startsWith', 'endsWith', 'toLowerCase', 'toUpperCase', 'trim', 'isEmpty', 'toString', 'charAt']);

// Java's String.split takes a regular expression; a literal without regex metacharacters means the
// same in both languages. Java drops trailing empty strings.
const REGEX_META = /[\\^$.|?*+()[\]{}]/;

export class UnsupportedError extends Error {}

const stringMethods = {
  uid: 'java-string',
  match: ({ context }) => typeof context === 'string',
  resolve: ({ context, property, params }) => {
    switch (property) {
      case 'length':
        return context.length;
      case 'isEmpty':
        return context.length === 0;
      case 'contains':
        return context.includes(String(params[0]));
      case 'equals':
        return context === params[0];
      case 'split': {
        const sep = params[0];
        if (params.length !== 1 || typeof sep !== 'string' || sep === '' || REGEX_META.test(sep)) {
          throw new UnsupportedError(`the local API Gateway supports String.split on one literal without regular-expression characters, not ${JSON.stringify(params)}`);
        }
        const parts = context.split(sep);
        while (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
        return parts;
      }
    }
    if (!STRING_METHODS.has(property) || typeof context[property] !== 'function') {
      throw new UnsupportedError(`the local API Gateway does not support String.${property}() in a mapping template`);
    }
    return context[property](...params);
  },
};

// formEncode is Java's URLEncoder.encode(s, "UTF-8"): application/x-www-form-urlencoded, letters,
// digits and ".-*_" kept, a space as "+", every other UTF-8 byte as %XX (upper case).
export function formEncode(s) {
  return Array.from(new TextEncoder().encode(String(s)), (b) => {
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9.\-*_]/.test(c)) return c;
    if (c === ' ') return '+';
    return '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }).join('');
}

// escapeJavaScript escapes a string with JavaScript string rules (Apache Commons'
// StringEscapeUtils.escapeJavaScript, which API Gateway's $util.escapeJavaScript is): quotes,
// backslash, "/" and control characters; non-ASCII as \uXXXX.
export function escapeJavaScript(s) {
  let out = '';
  for (const ch of String(s)) {
    const code = ch.codePointAt(0);
    const units = ch.length === 2 ? [ch.charCodeAt(0), ch.charCodeAt(1)] : [code];
    switch (ch) {
      case "'": out += "\\'"; continue;
      case '"': out += '\\"'; continue;
      case '\\': out += '\\\\'; continue;
      case '/': out += '\\/'; continue;
      case '\b': out += '\\b'; continue;
      case '\n': out += '\\n'; continue;
      case '\t': out += '\\t'; continue;
      case '\f': out += '\\f'; continue;
      case '\r': out += '\\r'; continue;
    }
    if (code < 0x20 || code > 0x7e) {
      out += units.map((u) => '\\u' + u.toString(16).toUpperCase().padStart(4, '0')).join('');
    } else {
      out += ch;
    }
  }
  return out;
}

// jsonPath evaluates x on the payload as $input.path and $input.json do: one match is the value
// itself, several a list, none null.
function jsonPath(body, x) {
  let doc;
  try {
    doc = body === '' ? {} : JSON.parse(body);
  } catch {
    throw new UnsupportedError('the request body is not JSON, so $input.path and $input.json cannot read it');
  }
  const found = JSONPath({ path: x, json: doc, wrap: false });
  return found === undefined ? null : found;
}

// render renders template for a request: { body, path, querystring, header, context, stageVariables }.
export function render(template, request = {}) {
  const body = request.body ?? '';
  const params = { path: { ...request.path }, querystring: { ...request.querystring }, header: { ...request.header } };
  const input = {
    body,
    json: (x) => JSON.stringify(jsonPath(body, x)),
    path: (x) => jsonPath(body, x),
    params: (...x) => {
      if (x.length === 0) return params;
      for (const where of ['path', 'querystring', 'header']) {
        if (Object.hasOwn(params[where], x[0])) return params[where][x[0]];
      }
      return '';
    },
  };
  const util = {
    escapeJavaScript,
    parseJson: (s) => JSON.parse(s),
    urlEncode: formEncode,
    urlDecode: (s) => decodeURIComponent(String(s).replace(/\+/g, ' ')),
    base64Encode: (s) => Buffer.from(String(s), 'utf8').toString('base64'),
    base64Decode: (s) => Buffer.from(String(s), 'base64').toString('utf8'),
  };
  const compiled = new Compile(parse(template), { customMethodHandlers: [stringMethods] });
  return compiled.render({ input, util, context: request.context ?? {}, stageVariables: request.stageVariables ?? {} });
}
