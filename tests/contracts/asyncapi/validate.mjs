// Validate AsyncAPI documents with the official parser (@asyncapi/parser, which checks them against
// the AsyncAPI JSON Schemas of @asyncapi/specs and its own rules). Prints one JSON object:
// {"<file>": {"valid": bool, "diagnostics": [{code, message, path, severity}]}}; severity 0 is an error.
import { Parser } from '@asyncapi/parser';
import fs from 'node:fs';

const parser = new Parser();
const report = {};
for (const file of process.argv.slice(2)) {
  const { document, diagnostics } = await parser.parse(fs.readFileSync(file, 'utf8'));
  report[file] = {
    valid: document !== undefined && !diagnostics.some((d) => d.severity === 0),
    diagnostics: diagnostics.map((d) => ({ code: d.code, message: d.message, path: d.path, severity: d.severity })),
  };
}
console.log(JSON.stringify(report));
