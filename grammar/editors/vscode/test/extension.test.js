// Runs extension.js against stand-ins for the `vscode` API and the language
// client, outside VS Code:
//
//   node test/extension.test.js        (part of npm test)
//
// Checks: the client launches `<flow.serverPath> lsp` over stdio for `flow`
// documents; a missing server gives one clear error and no client; a server
// that fails to start gives a clear error; deactivate stops the client;
// changing flow.serverPath restarts it.

'use strict';

const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const Module = require('module');

// ------------------------------------------------------------ stand-ins
const state = {
  settings: {},
  errors: [],
  clients: [],
  commands: new Map(),
  configListeners: [],
  startFails: false,
};

class FakeClient {
  constructor(id, name, serverOptions, clientOptions) {
    Object.assign(this, { id, name, serverOptions, clientOptions, running: false, stopped: 0 });
    state.clients.push(this);
  }
  async start() {
    if (state.startFails) throw new Error('Launching server using command flowc failed.');
    this.running = true;
  }
  needsStop() {
    return this.running;
  }
  async stop() {
    this.running = false;
    this.stopped += 1;
  }
  async dispose() {
    if (!this.running) throw new Error('Client is not running and can\'t be stopped.');
    return this.stop();
  }
}

const vscode = {
  window: {
    createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {} }),
    showErrorMessage: (message) => {
      state.errors.push(message);
      return Promise.resolve(undefined);
    },
  },
  workspace: {
    workspaceFolders: [{ uri: { scheme: 'file', fsPath: os.tmpdir() } }],
    getConfiguration: (section) => ({ get: (key) => state.settings[`${section}.${key}`] }),
    onDidChangeConfiguration: (listener) => {
      state.configListeners.push(listener);
      return { dispose() {} };
    },
    createFileSystemWatcher: (glob) => ({ glob, dispose() {} }),
  },
  commands: {
    registerCommand: (name, fn) => {
      state.commands.set(name, fn);
      return { dispose() {} };
    },
    executeCommand: () => Promise.resolve(),
  },
};

const originalLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  if (request === 'vscode') return vscode;
  if (request === 'vscode-languageclient/node') return { LanguageClient: FakeClient, TransportKind: { stdio: 0 } };
  return originalLoad.call(this, request, parent, isMain);
};
const extension = require('../extension.js');

// ------------------------------------------------------------ helpers
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const context = () => ({ subscriptions: [] });
function reset(settings) {
  state.settings = settings;
  state.errors = [];
  state.clients = [];
  state.startFails = false;
  state.configListeners = [];
}

// A fake flowc: an executable file in a temporary directory.
const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'flow-ext-test-'));
const flowc = path.join(bin, process.platform === 'win32' ? 'flowc.cmd' : 'flowc');
fs.writeFileSync(flowc, process.platform === 'win32' ? '@echo off\r\n' : '#!/bin/sh\n');
fs.chmodSync(flowc, 0o755);

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

test('launches `<serverPath> lsp` over stdio for flow documents', async () => {
  reset({ 'flow.serverPath': flowc });
  extension.activate(context());
  await settle();
  assert.strictEqual(state.errors.length, 0, state.errors.join('\n'));
  assert.strictEqual(state.clients.length, 1);
  const client = state.clients[0];
  assert.strictEqual(client.id, 'flow', 'the client id is the prefix of flow.trace.server');
  assert.strictEqual(client.serverOptions.run.command, flowc);
  assert.deepStrictEqual(client.serverOptions.run.args, ['lsp']);
  assert.strictEqual(client.serverOptions.run.transport, 0);
  assert.deepStrictEqual(client.serverOptions.debug, client.serverOptions.run);
  assert.ok(client.clientOptions.documentSelector.every((selector) => selector.language === 'flow'));
  assert.ok(client.running);
  await extension.deactivate();
  assert.strictEqual(client.stopped, 1, 'deactivate stops the client');
});

test('a bare name is looked up on PATH', async () => {
  reset({ 'flow.serverPath': 'flowc' });
  const savedPath = process.env.PATH;
  process.env.PATH = bin + path.delimiter + (savedPath || '');
  try {
    extension.activate(context());
    await settle();
  } finally {
    process.env.PATH = savedPath;
  }
  assert.strictEqual(state.errors.length, 0, state.errors.join('\n'));
  assert.strictEqual(state.clients[0].serverOptions.run.command, flowc);
  await extension.deactivate();
});

test('a missing server gives one clear error and starts no client', async () => {
  reset({ 'flow.serverPath': 'flowc-that-does-not-exist' });
  extension.activate(context());
  await settle();
  assert.strictEqual(state.clients.length, 0);
  assert.strictEqual(state.errors.length, 1);
  assert.match(state.errors[0], /flowc-that-does-not-exist" was not found on PATH/);
  assert.match(state.errors[0], /flow\.serverPath/);
  await extension.deactivate();
});

test('a missing path gives a clear error', async () => {
  reset({ 'flow.serverPath': path.join(bin, 'nope', 'flowc') });
  extension.activate(context());
  await settle();
  assert.strictEqual(state.clients.length, 0);
  assert.match(state.errors[0], /is not an executable file/);
  await extension.deactivate();
});

test('a server that fails to start gives a clear error', async () => {
  reset({ 'flow.serverPath': flowc });
  state.startFails = true;
  extension.activate(context());
  await settle();
  assert.strictEqual(state.errors.length, 1);
  assert.match(state.errors[0], /could not be started: Launching server using command flowc failed/);
  assert.match(state.errors[0], /lsp/);
  await extension.deactivate();
});

test('changing flow.serverPath restarts the server', async () => {
  reset({ 'flow.serverPath': flowc });
  extension.activate(context());
  await settle();
  const first = state.clients[0];
  for (const listener of state.configListeners) {
    listener({ affectsConfiguration: (key) => key === 'flow.serverPath' });
  }
  await settle();
  assert.strictEqual(first.stopped, 1);
  assert.strictEqual(state.clients.length, 2);
  assert.ok(state.clients[1].running);
  await extension.deactivate();
  assert.strictEqual(state.clients[1].stopped, 1);
});

(async () => {
  let failures = 0;
  for (const { name, fn } of tests) {
    try {
      await fn();
    } catch (error) {
      failures += 1;
      console.error(`FAIL ${name}\n  ${error.message}`);
    }
  }
  fs.rmSync(bin, { recursive: true, force: true });
  console.log(`extension tests: ${tests.length - failures} passed, ${failures} failed`);
  process.exit(failures > 0 ? 1 : 0);
})();
