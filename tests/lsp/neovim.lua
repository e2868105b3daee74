-- Drives `flowc lsp` with Neovim's own LSP client (headless):
--
--   FLOWC=target/release/flowc nvim --headless -u NONE -c "luafile tests/lsp/neovim.lua"
--
-- in a directory holding broken.flow (see tests/lsp/run.sh). Checks the
-- diagnostics, hover, go to definition, completion, the quick fix, an
-- incremental edit (Neovim sends ranges) and formatting. Prints each step;
-- exits 1 on the first failure.

local failures = 0
local function check(ok, what)
  print((ok and "ok   " or "FAIL ") .. what)
  if not ok then
    failures = failures + 1
  end
end

local function request(buf, method, params)
  local answers, err = vim.lsp.buf_request_sync(buf, method, params, 10000)
  for _, answer in pairs(answers or {}) do
    if answer.err then
      print("  " .. method .. ": " .. vim.inspect(answer.err))
      return nil
    end
    return answer.result
  end
  print("  " .. method .. ": no answer (" .. tostring(err) .. ")")
  return nil
end

local function main()
local client = vim.lsp.start_client({ name = "flowc", cmd = { os.getenv("FLOWC"), "lsp" }, root_dir = vim.fn.getcwd() })
check(client ~= nil, "the server starts")
vim.cmd("edit broken.flow")
local buf = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(buf, client)
local uri = vim.uri_from_bufnr(buf)

-- The CLI's diagnostic, at the misspelled name (line 5, column 23, 0-based 4/23).
vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 20)
local diagnostics = vim.diagnostic.get(buf)
check(#diagnostics == 1 and diagnostics[1].code == "E0101", "one E0101")
check(diagnostics[1] and diagnostics[1].lnum == 4 and diagnostics[1].col == 23, "at `reseacher`")

-- Hover and definition on the agent's declaration.
local at_agent = { textDocument = { uri = uri }, position = { line = 1, character = 8 } }
local hover = request(buf, "textDocument/hover", at_agent)
check(hover and hover.contents.value:find("agent researcher", 1, true) ~= nil, "hover shows the declaration")
local at_start = { textDocument = { uri = uri }, position = { line = 3, character = 10 } }
local definition = request(buf, "textDocument/definition", at_start)
check(definition and definition.range.start.line == 4, "`start: research` goes to the node")

-- Completion of an agent where a node's target goes.
local completion = request(buf, "textDocument/completion", { textDocument = { uri = uri }, position = { line = 4, character = 23 } })
local labels = {}
for _, item in ipairs((completion and (completion.items or completion)) or {}) do
  table.insert(labels, item.label)
end
check(table.concat(labels, ",") == "researcher", "an agent is completed after `agent`: " .. table.concat(labels, ","))

-- The quick fix, applied as Neovim applies workspace edits.
local range = { start = { line = 4, character = 23 }, ["end"] = { line = 4, character = 23 } }
local actions = request(buf, "textDocument/codeAction", {
  textDocument = { uri = uri },
  range = range,
  context = {
    diagnostics = vim.tbl_map(function(d)
      local span = { start = { line = d.lnum, character = d.col }, ["end"] = { line = d.end_lnum, character = d.end_col } }
      return { range = span, message = d.message, code = d.code, severity = d.severity }
    end, diagnostics),
  },
})
if actions == nil then print("code actions: no answer") end
actions = actions or {}
check(#actions == 1 and actions[1].title == "Replace `reseacher` with `researcher`", "one quick fix")
if actions[1] then
  vim.lsp.util.apply_workspace_edit(actions[1].edit, "utf-16")
end
check(vim.api.nvim_buf_get_lines(buf, 4, 5, false)[1]:find("agent researcher", 1, true) ~= nil, "the fix is in the buffer")
-- Neovim sent the edit as a range: the server's text must now be clean.
vim.wait(10000, function() return #vim.diagnostic.get(buf) == 0 end, 20)
check(#vim.diagnostic.get(buf) == 0, "no diagnostics after the incremental edit")

-- Formatting: mess a line up, format, get the canonical layout back.
vim.api.nvim_buf_set_lines(buf, 1, 2, false, { "agent   researcher {provider: local}" })
vim.wait(200)
local edits = request(buf, "textDocument/formatting", { textDocument = { uri = uri }, options = { tabSize = 2, insertSpaces = true } }) or {}
vim.lsp.util.apply_text_edits(edits, buf, "utf-16")
check(vim.api.nvim_buf_get_lines(buf, 1, 2, false)[1] == "agent researcher { provider: local }", "formatted")

vim.lsp.stop_client(client)
end

local ran, err = pcall(main)
if not ran then
  print("FAIL the script stopped: " .. tostring(err))
  failures = failures + 1
end
if failures > 0 then
  print(failures .. " failure(s)")
  vim.cmd("cquit 1")
else
  print("neovim: all checks passed")
  vim.cmd("qall!")
end
