// Flow's report page: clicking a node shows its attempts, artifacts and
// events. Reads only the JSON inlined in #flow-data; fetches nothing.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('flow-data').textContent);
  var details = document.getElementById('details');

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) {
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  function digest(d) { return d ? el('span', { 'class': 'digest', title: d }, [d.slice(0, 19)]) : el('span', {}, ['—']); }
  function ms(v) { return v < 1000 ? v + ' ms' : (v / 1000).toFixed(1) + ' s'; }

  function attemptsTable(node) {
    var rows = [el('tr', {}, ['#', 'trigger', 'state', 'took', 'calls', 'output'].map(function (h) { return el('th', {}, [h]); }))];
    node.attempts.forEach(function (a) {
      var took = a.end_ms === undefined ? 'running' : ms(a.end_ms - a.start_ms);
      var calls = el('td', {}, []);
      a.calls.forEach(function (c) {
        var text = c.kind + ' ' + c.name + ' (' + ms(c.duration_ms) + (c.tokens !== undefined ? ', ' + c.tokens + ' tokens' : '') + ')' + (c.error ? ': ' + c.error : '');
        calls.appendChild(el('div', {}, [text + ' ', c.input ? digest(c.input) : '', c.output ? ' → ' : '', c.output ? digest(c.output) : '']));
      });
      rows.push(el('tr', {}, [el('td', {}, [String(a.no)]), el('td', {}, [a.trigger]), el('td', { 'class': 'st-' + a.state }, [a.state + (a.error ? ': ' + a.error : '')]), el('td', {}, [took]), calls, el('td', {}, [digest(a.output)])]));
    });
    return el('table', {}, rows);
  }

  function own(object, key) { return Object.prototype.hasOwnProperty.call(object, key); }

  function show(name, from) {
    if (!details) { return; }
    document.querySelectorAll('.node.selected').forEach(function (n) { n.classList.remove('selected'); });
    var picked = (from && from.closest('section[data-workflow]')) || document;
    picked.querySelectorAll('.node').forEach(function (n) { if (n.getAttribute('data-node') === name) { n.classList.add('selected'); } });
    details.textContent = '';
    details.hidden = false;
    if (data.mode !== 'run') {
      Object.keys(data.workflows).forEach(function (w) {
        data.workflows[w].nodes.filter(function (n) { return n.name === name; }).forEach(function (n) {
          details.appendChild(el('h3', {}, [n.name]));
          details.appendChild(el('p', {}, [w + ': ' + n.kind + ' ' + n.target]));
        });
      });
      return;
    }
    var node = own(data.nodes, name) ? data.nodes[name] : null;
    details.appendChild(el('h3', {}, [name]));
    if (!node) { details.appendChild(el('p', {}, ['Not run.'])); return; }
    details.appendChild(el('p', {}, [node.state + ' · ' + node.visits + ' visit(s)' + (node.rounds ? ' · ' + node.rounds + ' round(s)' : '')]));
    details.appendChild(el('h4', {}, ['Attempts']));
    details.appendChild(attemptsTable(node));
    details.appendChild(el('h4', {}, ['Artifacts']));
    var arts = el('p', {}, ['in: ']);
    node.inputs.forEach(function (d) { arts.appendChild(digest(d)); arts.appendChild(document.createTextNode(' ')); });
    arts.appendChild(document.createTextNode(' out: '));
    node.outputs.forEach(function (d) { arts.appendChild(digest(d)); arts.appendChild(document.createTextNode(' ')); });
    details.appendChild(arts);
    details.appendChild(el('h4', {}, ['Events']));
    var seqs = {};
    node.events.forEach(function (s) { seqs[s] = true; });
    var rows = [el('tr', {}, ['seq', 'at', 'kind', ''].map(function (h) { return el('th', {}, [h]); }))];
    data.rows.filter(function (r) { return seqs[r.seq]; }).forEach(function (r) {
      rows.push(el('tr', {}, [el('td', {}, [String(r.seq)]), el('td', {}, [ms(r.at_ms)]), el('td', {}, [el('code', {}, [r.kind])]), el('td', {}, [r.text])]));
    });
    details.appendChild(el('table', {}, rows));
    if (details.scrollIntoView) { details.scrollIntoView({ block: 'nearest' }); }
  }

  document.querySelectorAll('[data-node]').forEach(function (n) {
    n.addEventListener('click', function () { show(n.getAttribute('data-node'), n); });
    n.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); show(n.getAttribute('data-node'), n); } });
  });
  // A link to a node: report.html#node=NAME opens its details.
  var linked = /^#node=(.+)$/.exec(window.location.hash);
  if (linked) {
    var target = null;
    try { target = decodeURIComponent(linked[1]); } catch (ignored) { target = null; }
    if (target !== null) { show(target, null); }
  }
  document.body.setAttribute('data-nodes', String(document.querySelectorAll('svg.graph g.node').length));
  document.body.setAttribute('data-ready', '1');
}());
