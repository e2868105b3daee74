// The packaged extension, for real: unpacks target/flow-lang.vsix, loads
// its extension.js with the vscode-languageclient the package bundles, and
// lets that client start the real `flowc lsp` on a broken twin. The test
// passes when the client hands VS Code the model checker's E1001.
//
//   FLOWC=target/release/flowc node test/packaged.test.js target/flow-lang.vsix
//
// Only the `vscode` module is a stand-in (VS Code itself cannot run here):
// the parts of its API the client touches, recording the diagnostics it
// sets. Run by .ci/build-vsix.sh after packaging.

'use strict';

const assert = require('assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const Module = require('module');

const [vsix] = process.argv.slice(2);
const flowc = process.env.FLOWC;
assert.ok(vsix && fs.existsSync(vsix), `the package ${vsix} exists (run .ci/build-vsix.sh first)`);
assert.ok(flowc && fs.existsSync(flowc), `FLOWC=${flowc} names the flowc binary`);
const root = path.resolve(__dirname, '..', '..', '..', '..');
const twin = path.join(root, 'examples', 'research_writer', 'research_writer.broken.flow');

// ------------------------------------------------------------ unpack
const unpacked = fs.mkdtempSync(path.join(os.tmpdir(), 'flow-vsix-'));
childProcess.execFileSync('python3', ['-c', 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])', vsix, unpacked]);
const extensionDir = path.join(unpacked, 'extension');
assert.ok(fs.existsSync(path.join(extensionDir, 'node_modules', 'vscode-languageclient')), 'the client is bundled');

// ------------------------------------------------------------ the vscode stand-in
/** Anything not modelled below: callable, constructible, disposable. */
function anything(name) {
  const target = function () {};
  return new Proxy(target, {
    get(_, prop) {
      if (prop === 'then') return undefined; // not a promise
      if (prop === Symbol.iterator) return function* () {};
      if (prop === Symbol.toPrimitive) return () => name;
      if (prop === 'dispose') return () => {};
      return anything(`${name}.${String(prop)}`);
    },
    apply: () => anything(`${name}()`),
    construct: () => anything(`new ${name}`),
  });
}

/** An object whose listed members are real and whose others are `anything`. */
function partly(name, members) {
  return new Proxy(members, {
    get(target, prop) {
      if (prop in target) return target[prop];
      if (prop === 'then') return undefined;
      return anything(`${name}.${String(prop)}`);
    },
  });
}

class Disposable {
  constructor(fn) {
    this.fn = fn;
  }
  static from(...items) {
    return new Disposable(() => items.forEach((item) => item && item.dispose && item.dispose()));
  }
  dispose() {
    if (this.fn) this.fn();
  }
}

class EventEmitter {
  constructor() {
    this.listeners = [];
    this.event = (listener, thisArg) => {
      const bound = listener.bind(thisArg);
      this.listeners.push(bound);
      return new Disposable(() => (this.listeners = this.listeners.filter((l) => l !== bound)));
    };
  }
  fire(value) {
    this.listeners.forEach((listener) => listener(value));
  }
  dispose() {
    this.listeners = [];
  }
}

class Uri {
  constructor(scheme, fsPath) {
    this.scheme = scheme;
    this.path = fsPath;
    this.fsPath = fsPath;
    this.authority = '';
    this.query = '';
    this.fragment = '';
  }
  static file(fsPath) {
    return new Uri('file', fsPath);
  }
  static parse(text) {
    const match = /^([a-z]+):\/\/(.*)$/.exec(text);
    return match ? new Uri(match[1], decodeURIComponent(match[2])) : new Uri('file', text);
  }
  toString() {
    return `${this.scheme}://${encodeURI(this.path)}`;
  }
  toJSON() {
    return this.toString();
  }
  with() {
    return this;
  }
}

class CancellationTokenSource {
  constructor() {
    this.token = { isCancellationRequested: false, onCancellationRequested: new EventEmitter().event };
  }
  cancel() {
    this.token.isCancellationRequested = true;
  }
  dispose() {}
}

class Position {
  constructor(line, character) {
    this.line = line;
    this.character = character;
  }
}

class Range {
  constructor(a, b, c, d) {
    [this.start, this.end] = typeof a === 'number' ? [new Position(a, b), new Position(c, d)] : [a, b];
  }
}

class Diagnostic {
  constructor(range, message, severity) {
    Object.assign(this, { range, message, severity });
  }
}

const text = fs.readFileSync(twin, 'utf8');
const document = {
  uri: Uri.file(twin),
  fileName: twin,
  languageId: 'flow',
  version: 1,
  isClosed: false,
  isDirty: false,
  isUntitled: false,
  lineCount: text.split('\n').length,
  getText: () => text,
};

const state = { diagnostics: new Map(), errors: [], log: [], settings: { 'flow.serverPath': path.resolve(flowc), 'flow.trace.server': process.env.FLOW_TRACE || 'off' } };
const events = () => new EventEmitter().event;

const vscode = partly('vscode', {
  version: '1.95.0',
  Uri,
  Position,
  Range,
  Diagnostic,
  Disposable,
  EventEmitter,
  CancellationTokenSource,
  DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
  workspace: partly('workspace', {
    textDocuments: [document],
    notebookDocuments: [],
    workspaceFolders: undefined,
    getConfiguration: (section) => ({ get: (key, fallback) => state.settings[`${section}.${key}`] ?? fallback, has: () => false }),
    onDidOpenTextDocument: events(),
    onDidCloseTextDocument: events(),
    onDidChangeTextDocument: events(),
    onDidSaveTextDocument: events(),
    onWillSaveTextDocument: events(),
    onDidChangeConfiguration: events(),
    onDidChangeWorkspaceFolders: events(),
    createFileSystemWatcher: () => ({ onDidCreate: events(), onDidChange: events(), onDidDelete: events(), dispose() {} }),
  }),
  window: partly('window', {
    activeTextEditor: undefined,
    visibleTextEditors: [],
    tabGroups: { all: [], onDidChangeTabs: events(), onDidChangeTabGroups: events() },
    onDidChangeActiveTextEditor: events(),
    onDidChangeVisibleTextEditors: events(),
    createOutputChannel: (name) => ({
      name,
      append: (line) => state.log.push(line),
      appendLine: (line) => state.log.push(line),
      replace() {},
      clear() {},
      show() {},
      hide() {},
      dispose() {},
    }),
    showErrorMessage: (message) => {
      state.errors.push(message);
      return Promise.resolve(undefined);
    },
    showWarningMessage: () => Promise.resolve(undefined),
    showInformationMessage: () => Promise.resolve(undefined),
  }),
  languages: partly('languages', {
    match: (selector, doc) => ([].concat(selector).some((s) => (typeof s === 'string' ? s : s.language) === doc.languageId) ? 10 : 0),
    createDiagnosticCollection: (name) => ({
      name,
      set: (uri, diagnostics) => state.diagnostics.set(String(uri), diagnostics || []),
      delete: (uri) => state.diagnostics.delete(String(uri)),
      clear: () => state.diagnostics.clear(),
      forEach() {},
      get: (uri) => state.diagnostics.get(String(uri)),
      has: (uri) => state.diagnostics.has(String(uri)),
      dispose() {},
    }),
  }),
  commands: partly('commands', {
    registerCommand: () => new Disposable(),
    executeCommand: () => Promise.resolve(),
  }),
});

const originalLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  if (request === 'vscode') return vscode;
  return originalLoad.call(this, request, parent, isMain);
};

// ------------------------------------------------------------ the test
(async () => {
  const extension = require(path.join(extensionDir, 'extension.js'));
  extension.activate({ subscriptions: [], extensionPath: extensionDir });
  const deadline = Date.now() + 60000;
  const codes = () => (state.diagnostics.get(String(document.uri)) || []).map((d) => String(d.code && d.code.value !== undefined ? d.code.value : d.code));
  while (!codes().includes('E1001') && Date.now() < deadline && state.errors.length === 0) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  let failed = false;
  try {
    assert.deepStrictEqual(state.errors, [], 'no error shown');
    assert.ok(codes().includes('E1001'), `the model checker's E1001 reaches VS Code: got ${JSON.stringify(codes())}`);
    const violation = state.diagnostics.get(String(document.uri)).find((d) => String(d.code && d.code.value !== undefined ? d.code.value : d.code) === 'E1001');
    assert.ok(violation.range.start.line > 0, 'at its policy');
    console.log(`packaged extension: the bundled client shows ${JSON.stringify(codes())} for ${path.basename(twin)}`);
  } catch (error) {
    failed = true;
    console.error(`FAIL packaged extension: ${error.message}`);
    console.error(`the client's log:\n${state.log.join('\n')}`);
  }
  await extension.deactivate();
  fs.rmSync(unpacked, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
})().catch((error) => {
  console.error(`FAIL packaged extension: ${error.stack || error}`);
  process.exit(1);
});
