// The Flow extension for VS Code.
//
// Syntax highlighting and editing behaviour are declarative (the TextMate
// grammar and language-configuration.json). This file only starts the Flow
// language server, `flowc lsp`, over stdio for documents of language `flow`.
//
// Plain CommonJS on purpose: no build step between the repository and the
// packaged extension.

'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

const CLIENT_ID = 'flow'; // also the prefix of the `flow.trace.server` setting
const CLIENT_NAME = 'Flow Language Server';

/** @type {LanguageClient | undefined} */
let client;
/** @type {vscode.OutputChannel | undefined} */
let outputChannel;
/** Serialises starts and stops so a restart never races a start. */
let pending = Promise.resolve();

/**
 * @param {vscode.ExtensionContext} context
 */
function activate(context) {
  outputChannel = vscode.window.createOutputChannel(CLIENT_NAME);
  context.subscriptions.push(outputChannel);

  context.subscriptions.push(
    vscode.commands.registerCommand('flow.restartServer', () => schedule(restart)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('flow.serverPath')) {
        schedule(restart);
      }
    }),
  );

  // Not awaited: activation returns at once, the server comes up behind it.
  void schedule(start);
}

function deactivate() {
  return schedule(stop);
}

/**
 * Runs `task` after every earlier start/stop has finished.
 * @param {() => Promise<void>} task
 */
function schedule(task) {
  pending = pending.then(task, task).catch((error) => log(`Unexpected error: ${describe(error)}`));
  return pending;
}

async function restart() {
  await stop();
  await start();
}

async function start() {
  const configured = (vscode.workspace.getConfiguration('flow').get('serverPath') || 'flowc').trim() || 'flowc';
  const resolved = resolveExecutable(configured);
  if (resolved.error) {
    log(resolved.error);
    showStartError(resolved.error);
    return;
  }

  const executable = {
    command: resolved.command,
    args: ['lsp'],
    transport: TransportKind.stdio,
    options: { cwd: firstWorkspaceFolder() },
  };
  const serverOptions = { run: executable, debug: executable };
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'flow' },
      { scheme: 'untitled', language: 'flow' },
    ],
    outputChannel,
    traceOutputChannel: outputChannel,
    synchronize: {
      // Imported files and JSON schemas referenced from .flow sources.
      fileEvents: vscode.workspace.createFileSystemWatcher('**/*.{flow,json}'),
    },
  };

  log(`Starting ${resolved.command} lsp`);
  const candidate = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  client = candidate;
  try {
    await candidate.start();
  } catch (error) {
    const message =
      `Flow: the language server \`${resolved.command} lsp\` could not be started: ${describe(error)}. ` +
      'Check that this flowc is recent enough to have the `lsp` subcommand, or set "flow.serverPath". ' +
      'Syntax highlighting keeps working without the server.';
    log(message);
    showStartError(message);
    if (client === candidate) {
      client = undefined;
    }
    try {
      await candidate.dispose();
    } catch {
      // A client that never started has nothing to stop.
    }
  }
}

async function stop() {
  const running = client;
  client = undefined;
  if (running === undefined) {
    return;
  }
  try {
    if (running.needsStop()) {
      await running.stop();
    }
  } catch (error) {
    log(`Stopping the language server failed: ${describe(error)}`);
  }
}

/**
 * Resolves the `flow.serverPath` setting to an executable, or explains why
 * it cannot. A bare name is looked up on PATH; a path is resolved against
 * the first workspace folder.
 * @param {string} configured
 * @returns {{ command: string, error?: undefined } | { command?: undefined, error: string }}
 */
function resolveExecutable(configured) {
  let command = configured;
  if (command === '~' || command.startsWith('~/') || command.startsWith('~\\')) {
    command = path.join(os.homedir(), command.slice(1));
  }
  const folder = firstWorkspaceFolder();
  if (folder !== undefined) {
    command = command.replace(/\$\{workspaceFolder\}/g, folder);
  }

  const isPath = command.includes('/') || command.includes('\\');
  if (isPath) {
    const absolute = path.isAbsolute(command) ? command : path.resolve(folder || process.cwd(), command);
    if (!isExecutableFile(absolute)) {
      return {
        error:
          `Flow: cannot start the language server: "flow.serverPath" is "${configured}", ` +
          `but ${absolute} is not an executable file. Build flowc (\`cargo build --release -p flowc\`) ` +
          'or point "flow.serverPath" at the flowc binary.',
      };
    }
    return { command: absolute };
  }

  const found = searchPath(command);
  if (found === undefined) {
    return {
      error:
        `Flow: cannot start the language server: "${command}" was not found on PATH. ` +
        'Install flowc (from the Flow repository: `cargo install --path compiler/flowc`) ' +
        'or set "flow.serverPath" to the full path of the flowc binary.',
    };
  }
  return { command: found };
}

/** @param {string} name */
function searchPath(name) {
  const directories = (process.env.PATH || '').split(path.delimiter).filter(Boolean);
  const extensions =
    process.platform === 'win32'
      ? [''].concat((process.env.PATHEXT || '.EXE;.CMD;.BAT;.COM').split(';').filter(Boolean))
      : [''];
  for (const directory of directories) {
    for (const extension of extensions) {
      const candidate = path.join(directory, name + extension);
      if (isExecutableFile(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

/** @param {string} file */
function isExecutableFile(file) {
  try {
    if (!fs.statSync(file).isFile()) {
      return false;
    }
    if (process.platform !== 'win32') {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

function firstWorkspaceFolder() {
  const folders = vscode.workspace.workspaceFolders;
  return folders && folders.length > 0 && folders[0].uri.scheme === 'file' ? folders[0].uri.fsPath : undefined;
}

/** @param {string} message */
function showStartError(message) {
  const openSettings = 'Open Settings';
  const showOutput = 'Show Output';
  vscode.window.showErrorMessage(message, openSettings, showOutput).then((choice) => {
    if (choice === openSettings) {
      vscode.commands.executeCommand('workbench.action.openSettings', 'flow.serverPath');
    } else if (choice === showOutput && outputChannel) {
      outputChannel.show(true);
    }
  });
}

/** @param {string} line */
function log(line) {
  if (outputChannel) {
    outputChannel.appendLine(`[flow] ${line}`);
  }
}

/** @param {unknown} error */
function describe(error) {
  if (error instanceof Error) {
    return error.message;
  }
  return String(error);
}

module.exports = { activate, deactivate };
