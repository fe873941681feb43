// Levee's operator page, live: see ui/doc.go. The page is whole without
// this script; the script refreshes it every 2 s by fetching it again and
// swapping its [data-live] sections, computes rates from the counters the
// page carries, and manages the dead-letter list, which needs the admin
// token. No HTML is built from strings: text goes in with textContent.
(() => {
  'use strict';
  const POLL_MS = 2000;
  const TOKEN_KEY = 'levee-admin-token';
  const $ = (id) => document.getElementById(id);

  let prev = null; // {at, values: Map} of the last update
  let deadSig = '';

  function show(el, text) {
    if (!el) return;
    el.textContent = text;
    el.hidden = text === '';
  }

  // counters reads every [data-counter] value on the page.
  function counters() {
    const m = new Map();
    for (const el of document.querySelectorAll('[data-counter]')) {
      m.set(el.dataset.counter, Number(el.dataset.value));
    }
    return m;
  }

  function delta(cur, key) {
    if (!prev || !cur.has(key) || !prev.values.has(key)) return NaN;
    return cur.get(key) - prev.values.get(key);
  }

  // rates fills [data-rate] (per second), [data-avg] (a wait's mean) and
  // [data-ratio] (hits over hits and misses) from the counters' change
  // since the previous update. A counter that went down (the node
  // restarted) shows nothing.
  function rates() {
    const top = $('top');
    const at = top ? Number(top.dataset.at) : Date.now();
    const cur = counters();
    const dt = prev ? (at - prev.at) / 1000 : 0;
    if (dt > 0) {
      for (const el of document.querySelectorAll('[data-rate]')) {
        const d = delta(cur, el.dataset.rate);
        el.textContent = d >= 0 ? (d / dt).toFixed(d / dt < 10 ? 2 : 0) + '/s' : '';
      }
      for (const el of document.querySelectorAll('[data-avg]')) {
        const n = delta(cur, el.dataset.avg + ':n');
        const s = delta(cur, el.dataset.avg + ':sum');
        el.textContent = n > 0 && s >= 0 ? 'now ' + Math.round((s / n) * 1000) + 'ms' : '';
      }
      for (const el of document.querySelectorAll('[data-ratio]')) {
        const h = delta(cur, el.dataset.ratio + ':hit');
        const m = delta(cur, el.dataset.ratio + ':miss');
        el.textContent = h >= 0 && m >= 0 && h + m > 0 ? 'now ' + ((100 * h) / (h + m)).toFixed(1) + '%' : '';
      }
    }
    prev = { at, values: cur };
  }

  async function refresh() {
    const res = await fetch('./', { cache: 'no-store', headers: { Accept: 'text/html' } });
    if (!res.ok) throw new Error('HTTP ' + res.status);
    const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
    // Keep the history lists the operator opened.
    const open = new Set(Array.from(document.querySelectorAll('details[open][id]'), (d) => d.id));
    for (const fresh of doc.querySelectorAll('[data-live][id]')) {
      const old = $(fresh.id);
      if (old) old.replaceWith(document.adoptNode(fresh));
    }
    for (const id of open) {
      const d = $(id);
      if (d) d.open = true;
    }
  }

  let lastOK = Date.now();
  async function poll() {
    try {
      if (!document.hidden) {
        await refresh();
        rates();
        lastOK = Date.now();
        show($('poll'), 'live · updates every ' + POLL_MS / 1000 + ' s');
        if (token()) await loadDead();
      }
    } catch (e) {
      const ago = Math.round((Date.now() - lastOK) / 1000);
      show($('poll'), 'not updating: ' + e.message + ' (last update ' + ago + ' s ago)');
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  // The admin token lives in this tab's sessionStorage only.
  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

  function deadMsg(text) {
    show($('dead-msg'), text);
  }

  async function loadDead() {
    const res = await fetch('../jobs?state=dead&limit=50', {
      cache: 'no-store',
      headers: { Authorization: 'Bearer ' + token() },
    });
    if (res.status === 401 || res.status === 403) {
      renderDead([]);
      deadMsg('The admin token was refused (' + res.status + '). Enter it again.');
      return;
    }
    if (!res.ok) throw new Error('dead letters: HTTP ' + res.status);
    const body = await res.json();
    renderDead(body.jobs || []);
    deadMsg(body.jobs && body.jobs.length ? '' : 'No dead jobs.');
  }

  function cell(tr, label, text, cls) {
    const td = document.createElement('td');
    td.dataset.label = label;
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  // renderDead redraws the list when it changed, so a button being
  // clicked is not replaced under the pointer every poll.
  function renderDead(jobs) {
    const sig = jobs.map((j) => j.id + '/' + j.attempts).join(',');
    const table = $('dead-table');
    if (sig === deadSig && table) return;
    deadSig = sig;
    const rows = $('dead-rows');
    if (!rows || !table) return;
    rows.replaceChildren();
    for (const j of jobs) {
      const tr = document.createElement('tr');
      tr.dataset.job = j.id;
      const id = cell(tr, 'Job', '');
      const code = document.createElement('code');
      code.textContent = j.id;
      id.appendChild(code);
      cell(tr, 'Route', j.method + ' ' + j.route);
      cell(tr, 'Attempts', String(j.attempts), 'num');
      cell(tr, 'Dead since', j.finished_at ? new Date(j.finished_at).toISOString().slice(11, 19) + 'Z' : '');
      cell(tr, 'Last error', j.last_error || '');
      const act = cell(tr, '', '');
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = 'Replay';
      b.dataset.replay = j.id;
      act.appendChild(b);
      rows.appendChild(tr);
    }
    table.hidden = jobs.length === 0;
  }

  async function replay(button) {
    const id = button.dataset.replay;
    button.disabled = true;
    button.textContent = 'Replaying…';
    try {
      const res = await fetch('../jobs/' + encodeURIComponent(id) + '/replay', {
        method: 'POST',
        cache: 'no-store',
        headers: { Authorization: 'Bearer ' + token() },
      });
      const body = await res.json().catch(() => ({}));
      if (!res.ok) throw new Error(body.detail || body.title || 'HTTP ' + res.status);
      deadMsg('Job ' + id + ' queued again (state: ' + body.state + ').');
      deadSig = '';
      await loadDead();
      deadMsg('Job ' + id + ' queued again (state: ' + body.state + ').');
    } catch (e) {
      button.disabled = false;
      button.textContent = 'Replay';
      deadMsg('Replay of ' + id + ' failed: ' + e.message);
    }
  }

  function setupDead() {
    const form = $('token-form');
    if (!form) return; // no queue on this node
    form.hidden = false;
    const forget = $('forget');
    const input = $('token');
    const armed = () => {
      forget.hidden = !token();
      input.placeholder = token() ? 'token set for this tab' : 'cluster.admin_token';
    };
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      input.value = '';
      if (v) sessionStorage.setItem(TOKEN_KEY, v);
      armed();
      deadSig = '';
      loadDead().catch((e) => deadMsg(e.message));
    });
    forget.addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      armed();
      renderDead([]);
      deadMsg('');
    });
    $('dead-rows').addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-replay]');
      if (b && !b.disabled) replay(b);
    });
    armed();
    if (token()) loadDead().catch((e) => deadMsg(e.message));
    else deadMsg('Enter the admin token to list dead jobs and replay them.');
  }

  setupDead();
  rates();
  setTimeout(poll, POLL_MS);
})();
