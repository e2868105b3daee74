// Tokenizes Flow sources with vscode-textmate and vscode-oniguruma, the
// engine and regex library VS Code itself uses, and checks the scopes.
//
//   node test/grammar.test.js        (npm test)
//
// Checks: every pattern compiles in Oniguruma; the constructs fixture gets
// the expected scopes; every .flow file of the repository (examples and
// stdlib) tokenizes without running into the time limit, ends with every
// bracket region closed, and (broken twins aside) has no `invalid` scope.

'use strict';

const assert = require('assert');
const fs = require('fs');
const path = require('path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const EXTENSION = path.join(__dirname, '..');
const REPOSITORY = path.join(EXTENSION, '..', '..', '..');
const GRAMMAR = path.join(EXTENSION, 'syntaxes', 'flow.tmLanguage.json');

let failures = 0;
let passes = 0;

function check(name, fn) {
  try {
    fn();
    passes += 1;
  } catch (error) {
    failures += 1;
    console.error(`FAIL ${name}\n  ${String(error.message).split('\n').join('\n  ')}`);
  }
}

async function loadGrammar() {
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve('vscode-oniguruma')), 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const onigLib = Promise.resolve({
    createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
    createOnigString: (text) => new oniguruma.OnigString(text),
  });
  const registry = new vsctm.Registry({
    onigLib,
    loadGrammar: async (scopeName) => {
      if (scopeName !== 'source.flow') return null;
      return vsctm.parseRawGrammar(fs.readFileSync(GRAMMAR, 'utf8'), GRAMMAR);
    },
  });
  return registry.loadGrammar('source.flow');
}

/** Tokenizes `text`; returns the tokens and the rule stack at the end. */
function tokenize(grammar, text) {
  const lines = text.split(/\r?\n/);
  const tokens = [];
  let stack = vsctm.INITIAL;
  lines.forEach((line, index) => {
    const result = grammar.tokenizeLine(line, stack, 1000);
    if (result.stoppedEarly) {
      throw new Error(`line ${index + 1}: tokenization stopped early (time limit): ${line}`);
    }
    for (const token of result.tokens) {
      tokens.push({
        line: index + 1,
        lineText: line,
        text: line.substring(token.startIndex, token.endIndex),
        scopes: token.scopes,
      });
    }
    stack = result.ruleStack;
  });
  return { tokens, stack };
}

/** Every string that Oniguruma will compile, with where it comes from. */
function allPatterns(node, where, out) {
  if (Array.isArray(node)) {
    node.forEach((child, i) => allPatterns(child, `${where}[${i}]`, out));
  } else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if ((key === 'match' || key === 'begin' || key === 'end' || key === 'while') && typeof value === 'string') {
        out.push({ where: `${where}.${key}`, source: value });
      } else {
        allPatterns(value, `${where}.${key}`, out);
      }
    }
  }
  return out;
}

function fmt(token) {
  return `${JSON.stringify(token.text)} [${token.scopes.join(' ')}]`;
}

async function main() {
  const raw = JSON.parse(fs.readFileSync(GRAMMAR, 'utf8'));
  const grammar = await loadGrammar();
  assert.ok(grammar, 'source.flow did not load');

  check('every pattern compiles in Oniguruma', () => {
    for (const { where, source } of allPatterns(raw, '$', [])) {
      // Back-references in `end` (\1) are substituted at run time; none are used here.
      try {
        new oniguruma.OnigScanner([source]).dispose();
      } catch (error) {
        throw new Error(`${where}: ${source}: ${error.message}`);
      }
    }
  });

  // ------------------------------------------------------------ fixture
  const fixture = fs.readFileSync(path.join(__dirname, 'fixtures', 'constructs.flow'), 'utf8');
  const { tokens, stack } = tokenize(grammar, fixture);

  /**
   * The `nth` token (0-based) with exactly `text` on the first line that
   * contains `lineNeedle` carries `scope` (a prefix of one of its scopes,
   * matched at a dot boundary).
   */
  function expectScope(lineNeedle, text, scope, nth = 0) {
    check(`${JSON.stringify(lineNeedle)}: ${JSON.stringify(text)} is ${scope}`, () => {
      const lineNo = fixture.split('\n').findIndex((l) => l.includes(lineNeedle)) + 1;
      assert.ok(lineNo > 0, `no line contains ${JSON.stringify(lineNeedle)}`);
      const onLine = tokens.filter((t) => t.line === lineNo);
      const matching = onLine.filter((t) => t.text === text || t.text.trim() === text);
      const token = matching[nth];
      assert.ok(token, `no token ${JSON.stringify(text)} (#${nth}) on line ${lineNo}: ${onLine.map(fmt).join(', ')}`);
      const ok = token.scopes.some((s) => s === scope || s.startsWith(scope + '.'));
      assert.ok(ok, `line ${lineNo}: expected ${scope}, got ${fmt(token)}`);
    });
  }
  /** Like expectScope, but the token must carry no scope starting with `prefix`. */
  function expectNot(lineNeedle, text, prefix, nth = 0) {
    check(`${JSON.stringify(lineNeedle)}: ${JSON.stringify(text)} is not ${prefix}`, () => {
      const lineNo = fixture.split('\n').findIndex((l) => l.includes(lineNeedle)) + 1;
      const onLine = tokens.filter((t) => t.line === lineNo);
      const token = onLine.filter((t) => t.text === text || t.text.trim() === text)[nth];
      assert.ok(token, `no token ${JSON.stringify(text)} on line ${lineNo}: ${onLine.map(fmt).join(', ')}`);
      assert.ok(!token.scopes.some((s) => s.startsWith(prefix)), `line ${lineNo}: did not expect ${prefix}: ${fmt(token)}`);
    });
  }

  check('fixture ends with every region closed', () => assert.strictEqual(stack.depth, 1));

  // Comments.
  expectScope('// Every construct', '//', 'punctuation.definition.comment.flow');
  expectScope('// Every construct', ' Every construct the TextMate grammar scopes. Not a valid program: the', 'comment.line.double-slash.flow');
  expectScope('/* a block comment', '/*', 'punctuation.definition.comment.begin.flow');
  expectScope('over two lines */', '   over two lines ', 'comment.block.flow');
  expectScope('over two lines */', '*/', 'punctuation.definition.comment.end.flow');
  // Imports.
  expectScope('import std.evidence', 'import', 'keyword.control.import.flow');
  expectScope('import std.evidence', 'std.evidence', 'entity.name.namespace.flow');
  expectScope('import "shared', 'import', 'keyword.control.import.flow');
  expectScope('import "shared', 'shared/types.flow', 'string.quoted.double.flow');
  // Types.
  expectScope('type Scene', 'type', 'storage.type.type.flow');
  expectScope('type Scene', 'Scene', 'entity.name.type.flow');
  expectScope('type Scene', '=', 'keyword.operator.assignment.flow');
  expectScope('type Scene', 'id', 'support.type.property-name.flow');
  expectScope('type Scene', 'string', 'support.type.primitive.flow');
  expectScope('type Scene', 'has_audio', 'support.type.property-name.flow');
  expectScope('type Scene', 'bool', 'support.type.primitive.flow');
  expectScope('type Scene', 'note', 'support.type.property-name.flow');
  expectScope('type Scene', '?', 'keyword.operator.optional.flow');
  expectScope('type Scene', '|', 'keyword.operator.union.flow');
  expectScope('type Scene', '{', 'punctuation.section.block.begin.flow');
  // Declarations and the names they declare.
  expectScope('provider local', 'provider', 'storage.type.provider.flow');
  expectScope('provider local', 'local', 'entity.name.type.provider.flow');
  expectScope('provider local', 'scripted', 'support.type.variant.flow');
  expectScope('provider local', 'max_tokens', 'support.type.property-name.flow');
  expectScope('provider local', '4', 'constant.numeric.flow');
  expectScope('provider local', 'k', 'keyword.other.unit.flow');
  expectScope('provider local', '$', 'keyword.other.unit.currency.flow');
  expectScope('provider local', '0.55', 'constant.numeric.money.flow');
  expectScope('principal pm', 'principal', 'storage.type.principal.flow');
  expectScope('principal pm', 'pm', 'entity.name.type.principal.flow');
  expectScope('principal pm', 'human', 'support.type.variant.flow');
  expectScope('principal pm', '\\"', 'constant.character.escape.flow');
  expectScope('principal pm', '\\n', 'constant.character.escape.flow');
  expectScope('principal pm', '"', 'punctuation.definition.string.begin.flow');
  expectScope('tool ffprobe', 'tool', 'storage.type.tool.flow');
  expectScope('tool ffprobe', 'ffprobe', 'entity.name.type.tool.flow');
  expectScope('tool ffprobe', '30', 'constant.numeric.flow');
  expectScope('tool ffprobe', 's', 'keyword.other.unit.flow');
  expectScope('tool ffprobe', '/', 'keyword.operator.arithmetic.flow');
  expectScope('tool ffprobe', 'm', 'keyword.other.unit.flow');
  expectScope('tool ffprobe', '\\q', 'invalid.illegal.unknown-escape.flow');
  expectScope('agent writer {', 'agent', 'storage.type.agent.flow');
  expectScope('agent writer {', 'writer', 'entity.name.type.agent.flow');
  expectScope('agent writer {', 'provider', 'support.type.property-name.flow');
  expectScope('agent writer {', 'budget', 'support.type.property-name.flow');
  expectScope('agent writer {', 'cost', 'support.type.property-name.flow');
  expectScope('agent writer {', '5', 'constant.numeric.money.flow');
  expectScope('agent writer {', '%', 'keyword.other.unit.flow');
  expectScope('agent writer {', '1_000', 'constant.numeric.flow');
  expectScope('evaluator judge', 'judge', 'entity.name.type.evaluator.flow');
  expectScope('budget run_budget', 'budget', 'storage.type.budget.flow');
  expectScope('budget run_budget', 'run_budget', 'entity.name.type.budget.flow');
  expectScope('budget run_budget', 'ms', 'keyword.other.unit.flow');
  expectScope('budget run_budget', '2.5', 'constant.numeric.flow');
  expectScope('contract c', 'c', 'entity.name.type.contract.flow');
  expectScope('blackboard board', 'board', 'entity.name.type.blackboard.flow');
  expectScope('machine Lifecycle', 'machine', 'storage.type.machine.flow');
  expectScope('machine Lifecycle', 'Lifecycle', 'entity.name.type.machine.flow');
  expectScope('initial: PENDING', 'PENDING', 'variable.other.constant.flow');
  expectScope('PENDING -> DONE', '->', 'keyword.operator.arrow.flow');
  expectScope('workflow w', 'workflow', 'storage.type.workflow.flow');
  expectScope('workflow w', 'w', 'entity.name.type.workflow.flow');
  // Nodes and their kinds.
  expectScope('node research:', 'node', 'storage.type.node.flow');
  expectScope('node research:', 'research', 'entity.name.function.node.flow');
  expectScope('node research:', 'agent', 'support.type.node-kind.flow');
  expectScope('node research:', 'writer', 'variable.other.node-target.flow');
  expectScope('node research:', 'output', 'support.type.property-name.flow');
  expectScope('node research:', 'Scene', 'entity.name.type.flow');
  expectScope('node fan:', 'parallel', 'support.type.node-kind.flow');
  expectScope('node fan:', '[', 'punctuation.section.brackets.begin.flow');
  expectScope('node merged:', 'join', 'support.type.node-kind.flow');
  expectScope('node merged:', 'rule', 'support.type.property-name.flow');
  expectScope('node merged:', 'all', 'keyword.operator.quantifier.flow');
  expectScope('node approval:', 'human', 'support.type.node-kind.flow');
  expectScope('node approval:', 'pm', 'variable.other.node-target.flow');
  expectScope('node approval:', 'decisions', 'support.type.property-name.flow');
  for (const decision of ['approve', 'revise', 'replan', 'reject']) {
    expectScope('node approval:', decision, 'support.constant.decision.flow');
  }
  expectScope('node done:', 'end', 'support.type.node-kind.flow');
  expectScope('node done:', 'published', 'variable.other.node-target.flow');
  expectScope('node odd:', 'custom', 'variable.other.node-kind.flow');
  // Declared records: `record` is a keyword only before a name.
  expectScope('record draft_scored', 'record', 'storage.type.record.flow');
  expectScope('record draft_scored', 'draft_scored', 'entity.name.function.record.flow');
  expectScope('record draft_scored', 'score', 'support.type.property-name.flow');
  expectScope('record draft_scored', 'len', 'entity.name.function.flow');
  expectScope('record: research.id', 'record', 'support.type.property-name.flow');
  expectNot('record: research.id', 'record', 'storage');
  // Edges and expressions.
  expectScope('research -> fan -> done when', 'when', 'keyword.control.flow');
  expectScope('research -> fan -> done when', '!=', 'keyword.operator.comparison.flow');
  expectScope('research -> fan -> done when', 'and', 'keyword.operator.logical.flow');
  expectScope('research -> fan -> done when', 'not', 'keyword.operator.logical.flow');
  expectScope('research -> fan -> done when', '==', 'keyword.operator.comparison.flow');
  expectScope('research -> fan -> done when', 'true', 'constant.language.boolean.flow');
  expectScope('research -> fan -> done when', '.', 'punctuation.accessor.flow');
  expectScope('research -> fan -> done when', 'id', 'variable.other.property.flow');
  expectNot('research -> fan -> done when', 'research', 'entity.name');
  expectScope('fan -> done else', 'else', 'keyword.control.flow');
  // Gates, handlers, outcomes, actions.
  expectScope('gate g:', 'gate', 'storage.type.gate.flow');
  expectScope('gate g:', 'g', 'entity.name.function.gate.flow');
  expectScope('evaluate: [predicate', 'predicate', 'entity.name.function.flow');
  expectScope('evaluate: [predicate', 'len', 'entity.name.function.flow');
  expectScope('evaluate: [predicate', '>=', 'keyword.operator.comparison.flow');
  expectScope('evaluate: [predicate', 'schema_valid', 'entity.name.function.flow');
  expectScope('on_error: REQUIRES_DECISION', 'on_error', 'support.type.property-name.flow');
  expectScope('on_error: REQUIRES_DECISION', 'REQUIRES_DECISION', 'constant.language.gate-outcome.flow');
  expectScope('on PASS -> continue', 'on', 'keyword.control.on.flow');
  expectScope('on PASS -> continue', 'PASS', 'constant.language.gate-outcome.flow');
  expectScope('on PASS -> continue', 'continue', 'support.function.action.flow');
  expectScope('on approve, revise -> goto', 'approve', 'support.constant.decision.flow');
  expectScope('on approve, revise -> goto', 'revise', 'support.constant.decision.flow');
  expectScope('on approve, revise -> goto', 'goto', 'entity.name.function.flow');
  expectScope('on BLOCK -> terminate', 'BLOCK', 'constant.language.gate-outcome.flow');
  expectScope('on BLOCK -> terminate', 'terminate', 'entity.name.function.flow');
  expectScope('handoff research', 'handoff', 'storage.type.declaration.flow');
  expectScope('handoff research', 'accept', 'support.type.property-name.flow');
  expectScope('handoff research', '<=', 'keyword.operator.comparison.flow');
  expectScope('handoff research', '>', 'keyword.operator.comparison.flow');
  expectScope('handoff research', '<', 'keyword.operator.comparison.flow');
  expectScope('handoff research', 'null', 'constant.language.null.flow');
  expectScope('delegate research', 'delegate', 'storage.type.declaration.flow');
  expectScope('on budget_exhausted', 'budget_exhausted', 'variable.other.event.flow');
  expectScope('record quality_check', 'record', 'storage.type.record.flow');
  expectScope('record quality_check', 'quality_check', 'entity.name.function.record.flow');
  expectScope('record quality_check', 'outcome', 'support.type.property-name.flow');
  expectNot('record quality_check', 'outcome', 'entity.name', 1);
  // Policies.
  expectScope('policy p1', 'policy', 'storage.type.policy.flow');
  expectScope('policy p1', 'p1', 'entity.name.function.policy.flow');
  expectScope('policy p1', 'never', 'keyword.control.temporal.flow');
  expectScope('policy p1', 'called', 'entity.name.function.flow');
  expectScope('policy p1', 'by', 'variable.parameter.flow');
  expectScope('policy p1', 'before', 'keyword.control.temporal.flow');
  expectScope('policy p1', 'PASS', 'constant.language.gate-outcome.flow');
  expectScope('policy p2', 'always', 'keyword.control.temporal.flow');
  expectScope('policy p2', '=>', 'keyword.operator.implication.flow');
  expectScope('policy p2', 'eventually', 'keyword.control.temporal.flow');
  expectScope('policy p2', 'until', 'keyword.control.temporal.flow');
  expectScope('policy p2', 'false', 'constant.language.boolean.flow');
  expectScope('policy p3', 'within', 'keyword.control.temporal.flow');
  expectScope('policy p3', '3', 'constant.numeric.flow');
  expectScope('policy p3', 'steps', 'keyword.control.temporal.flow');
  expectScope('policy p4', 'recorded', 'entity.name.function.flow');
  expectScope('policy p4', 'quality_check', 'meta.function-call.flow');
  expectNot('policy p4', 'quality_check', 'entity.name');
  // Quantifiers, `in`, `;`, contextual `steps`, a stray `!`.
  expectScope('x: all(s in scenes', 'x', 'support.type.property-name.flow');
  expectScope('x: all(s in scenes', 'all', 'keyword.operator.quantifier.flow');
  expectScope('x: all(s in scenes', 'in', 'keyword.operator.in.flow');
  expectNot('x: all(s in scenes', 'scenes', 'support.type.property-name');
  expectScope('x: all(s in scenes', 'or', 'keyword.operator.logical.flow');
  expectScope('x: all(s in scenes', 'any', 'keyword.operator.quantifier.flow');
  expectScope('x: all(s in scenes', ';', 'punctuation.terminator.flow');
  expectScope('x: all(s in scenes', 'y', 'support.type.property-name.flow');
  expectNot('x: all(s in scenes', 'nodes', 'storage');
  expectNot('x: all(s in scenes', 'steps', 'keyword');
  expectScope('x: all(s in scenes', '!', 'invalid.illegal.character.flow');

  // ------------------------------------------------------------ real files
  const sources = [];
  for (const dir of ['examples', 'stdlib']) {
    const root = path.join(REPOSITORY, dir);
    if (!fs.existsSync(root)) continue;
    const walk = (d) => {
      for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
        const full = path.join(d, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.name.endsWith('.flow')) sources.push(full);
      }
    };
    walk(root);
  }
  check('the repository has .flow files to tokenize', () => assert.ok(sources.length > 0));
  for (const file of sources.sort()) {
    const relative = path.relative(REPOSITORY, file);
    check(`${relative} tokenizes cleanly`, () => {
      const result = tokenize(grammar, fs.readFileSync(file, 'utf8'));
      assert.strictEqual(result.stack.depth, 1, 'a bracket region is still open at the end of the file');
      if (!file.endsWith('.broken.flow')) {
        const invalid = result.tokens.filter((t) => t.scopes.some((s) => s.startsWith('invalid')));
        assert.deepStrictEqual(invalid.map((t) => `${t.line}: ${fmt(t)}`), []);
      }
    });
  }
  const example = path.join(REPOSITORY, 'examples', 'research_writer', 'research_writer.flow');
  if (fs.existsSync(example)) {
    check('research_writer.flow: key scopes', () => {
      const { tokens: t } = tokenize(grammar, fs.readFileSync(example, 'utf8'));
      const find = (line, text) => t.find((x) => x.lineText.includes(line) && x.text === text);
      const want = [
        ['node research: tool literature_search', 'tool', 'support.type.node-kind.flow'],
        ['node research: tool literature_search', 'literature_search', 'variable.other.node-target.flow'],
        ['policy outline_after_evidence', 'outline_after_evidence', 'entity.name.function.policy.flow'],
        ['cost: $2.00', '2.00', 'constant.numeric.money.flow'],
        ['tokens: 200k', 'k', 'keyword.other.unit.flow'],
        ['on BLOCK -> goto(blocked)', 'BLOCK', 'constant.language.gate-outcome.flow'],
        ['  budget: run_budget', 'budget', 'support.type.property-name.flow'],
      ];
      for (const [line, text, scope] of want) {
        const token = find(line, text);
        assert.ok(token, `no ${text} on ${line}`);
        assert.ok(token.scopes.includes(scope), `${line}: expected ${scope}, got ${fmt(token)}`);
      }
    });
  }

  console.log(`grammar tests: ${passes} passed, ${failures} failed (${sources.length} repository files)`);
  if (failures > 0) process.exit(1);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
