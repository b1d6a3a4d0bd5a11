// The Play tab's plan editor (viewer/play/planner.py): runs once when the component mounts, with `element`,
// `props`, `trigger`, `server` and `watch` from gr.HTML. The server draws the chart and finds the problems; this
// code only moves the dragged ship's shapes, keeps the undo history, and sends each edit back.
const root = element.querySelector('.pl');
const host = element.querySelector('.pl-chart');
const float = element.querySelector('.pl-float');
const statusLine = element.querySelector('.pl-status');
const msgLine = element.querySelector('.pl-msg');
const list = element.querySelector('.pl-problems');
const SIX = 6;
let S = null;            // the draft as the server last described it (see planner_value)
let undo = [], redo = [];
let sel = null;          // the selected ship id
let drag = null;         // the drag under way
let seq = 0;             // the last draft call sent; older answers are dropped
let timer = null;
let stale = false;

function parse(v) {
  if (!v || typeof v !== 'string') return null;
  try { return JSON.parse(v); } catch (e) { return null; }
}
function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
function entry(plan, ship) { return plan.find(e => e.ship === ship); }
function shipInfo(id) { return (S && S.ships[id]) || {id: id, name: '', sections: 1}; }
function say(text) { msgLine.textContent = text || ''; }

function load(value) {
  const next = parse(value);
  if (!next) { S = null; host.innerHTML = ''; statusLine.textContent = ''; list.innerHTML = ''; return; }
  const sameTask = S && S.task_id === next.task_id && same(S.start, next.start);
  if (!sameTask) { undo = []; redo = []; sel = null; }
  else if (!same(S.plan, next.plan)) { undo.push(S.plan); redo = []; }
  S = next;
  stale = false;
  say(next.note || '');
  draw();
}

// -- drawing -------------------------------------------------------------------------------------------------
function plotOf(svg) {
  const r = svg.querySelector('rect.plot[data-plot]');
  if (!r) return null;
  const [left, top, width, height, xlo, xhi, ylo, yhi] = r.getAttribute('data-plot').split(' ').map(Number);
  return {left, top, width, height, xlo, xhi, ylo, yhi, pxh: width / (xhi - xlo), pxs: height / (yhi - ylo)};
}
function draw() {
  if (!S) return;
  const began = performance.now();
  host.innerHTML = S.svg || '';
  const svg = host.querySelector('svg');
  if (svg) {
    svg.setAttribute('aria-label', 'Berth chart: drag a ship along the hours or the quay; Tab selects a ship');
    svg.querySelectorAll('rect.ship[data-ship]').forEach(r => {
      const id = Number(r.getAttribute('data-ship'));
      const info = shipInfo(id);
      r.setAttribute('tabindex', '0');
      r.setAttribute('role', 'button');
      r.setAttribute('aria-label', 'ship ' + id + ' ' + info.name);
      if (S.locked.includes(id)) r.classList.add('pl-locked');
      if (id === sel) r.classList.add('pl-sel');
    });
    markArrivals(svg);
    lift(svg);
  }
  drawProblems();
  drawStatus();
  drawButtons();
  root.setAttribute('data-draw-ms', String(Math.round(performance.now() - began)));
}
// The selected ship is drawn over the others, so a ship dropped onto another can be picked up again.
function lift(svg) {
  if (sel === null) return;
  const shapes = svg.querySelectorAll('rect[data-ship="' + sel + '"], text[data-ship="' + sel + '"]');
  shapes.forEach(s => { if (s !== document.activeElement) s.parentNode.appendChild(s); });
}
function markArrivals(svg) {
  const plot = plotOf(svg);
  if (!plot) return;
  const early = new Set((S.problems || []).filter(p => p.rule === 'ARRIVAL').map(p => p.ship));
  early.forEach(id => {
    const e = entry(S.plan, id), info = shipInfo(id);
    if (!e || info.arrival == null) return;
    const x = plot.left + (info.arrival - plot.xlo) * plot.pxh;
    const y0 = plot.top + (plot.yhi - (e.section + info.sections - 0.5)) * plot.pxs;
    const y1 = plot.top + (plot.yhi - (e.section - 0.5)) * plot.pxs;
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'path');
    line.setAttribute('d', 'M' + x + ',' + y0 + 'V' + y1);
    line.setAttribute('stroke', '#D62728'); line.setAttribute('stroke-width', '2');
    line.setAttribute('stroke-dasharray', '3,2'); line.setAttribute('class', 'pl-arrival');
    line.setAttribute('data-ship', String(id));
    const t = document.createElementNS('http://www.w3.org/2000/svg', 'title');
    t.textContent = 'ship ' + id + ' arrives at hour ' + info.arrival;
    line.appendChild(t);
    svg.appendChild(line);
  });
}
function drawProblems() {
  list.innerHTML = '';
  const problems = S.problems || [];
  ((S.summary || {}).entry_problems || []).slice(0, 4).forEach(text => {
    const li = document.createElement('li');
    li.textContent = 'entry: ' + text;
    list.appendChild(li);
  });
  problems.slice(0, 8).forEach(p => {
    const li = document.createElement('li');
    li.setAttribute('data-ship', String(p.ship));
    li.setAttribute('data-rule', p.rule);
    li.textContent = 'ship ' + p.ship + ': ' + p.problem;
    list.appendChild(li);
  });
  if (problems.length > 8) {
    const li = document.createElement('li');
    li.textContent = '… and ' + (problems.length - 8) + ' more, outlined red on the chart';
    list.appendChild(li);
  }
}
function drawStatus() {
  const sum = S.summary || {};
  const moved = S.plan.filter(e => !same(e, entry(S.start, e.ship))).length;
  const parts = [];
  if (sel === null) parts.push('Drag a ship along the hours or the quay, or tap one to select it and use the buttons');
  if (sel !== null) {
    const e = entry(S.plan, sel), info = shipInfo(sel);
    if (e) parts.push('Selected: ship ' + sel + ' ' + info.name + ', hour ' + e.berth_hour + ', section ' + e.section
      + (e.cranes != null ? ', ' + e.cranes + ' cranes' : '') + (S.locked.includes(sel) ? ' (locked)' : ''));
  }
  parts.push(sum.problems ? sum.problems + ' rule problems on ' + sum.ships_flagged.length + ' ships'
                          : 'no rule broken (press Check for the cost)');
  parts.push(moved + ' ships changed from ' + S.start_name + ' · ' + (sum.moved || 0)
             + ' off their published section' + (sum.move_cap ? ' · at most ' + sum.move_cap + ' movements an hour' : ''));
  if (stale) parts.push('⚠ not redrawn: the server did not answer');
  statusLine.textContent = parts.join(' · ');
}
function drawButtons() {
  const btn = act => element.querySelector('[data-act="' + act + '"]');
  btn('undo').disabled = !undo.length;
  btn('redo').disabled = !redo.length;
  btn('reset').disabled = same(S.plan, S.start);
  const none = sel === null;
  ['lock', 'h-6', 'h-1', 'h+1', 'h+6', 's+1', 's-1'].forEach(a => { btn(a).disabled = none; });
  btn('lock').setAttribute('aria-pressed', String(!none && S.locked.includes(sel)));
  btn('lock').textContent = !none && S.locked.includes(sel) ? '🔓 Unlock' : '🔒 Lock';
  ['cranes-', 'cranes+'].forEach(a => { btn(a).disabled = none || !S.crane_rule; btn(a).hidden = !S.crane_rule; });
}

// -- editing -------------------------------------------------------------------------------------------------
function select(id, focus) {
  sel = id;
  host.querySelectorAll('rect.pl-sel').forEach(r => r.classList.remove('pl-sel'));
  if (id !== null) {
    const r = host.querySelector('rect.ship[data-ship="' + id + '"]');
    if (r) {
      r.classList.add('pl-sel');
      if (!drag) lift(host.querySelector('svg'));
      if (focus) r.focus({preventScroll: true});
    }
  }
  drawStatus();
  drawButtons();
}
// The place a move would put the ship, or why not (off the quay, before hour 0, a locked ship).
function moved(id, dh, ds, dc) {
  const e = entry(S.plan, id), info = shipInfo(id);
  if (!e) return {why: 'ship ' + id + ' is not in the plan'};
  if (S.locked.includes(id)) return {why: 'ship ' + id + ' is locked: unlock it to move it'};
  const next = Object.assign({}, e, {berth_hour: e.berth_hour + dh, section: e.section + ds});
  if (dc) {
    const now = e.cranes != null ? e.cranes : (info.std_cranes || 1);
    next.cranes = Math.max(info.min_cranes || 1, Math.min(info.max_cranes || now + dc, now + dc));
    if (next.cranes === now) return {why: 'ship ' + id + ' takes ' + (info.min_cranes || 1) + '-' + info.max_cranes + ' cranes'};
  }
  if (next.berth_hour < 0) return {why: 'ship ' + id + ' cannot berth before hour 0: it is back where it was'};
  const [first, last] = S.quay;
  if (next.section < first || next.section + info.sections - 1 > last)
    return {why: 'ship ' + id + ' (' + info.sections + ' sections) would leave the quay (sections ' + first + '-' + last + '): it is back where it was'};
  return {entry: next};
}
function apply(id, dh, ds, dc, dropped) {
  const m = moved(id, dh, ds, dc || 0);
  if (m.why) { say(m.why); draw(); return false; }
  say('');
  commit(S.plan.map(e => (e.ship === id ? m.entry : e)), false, dropped);
  return true;
}
function commit(plan, fromHistory, now) {
  if (!fromHistory) { undo.push(S.plan); redo = []; }
  S.plan = plan;
  root.setAttribute('data-pending', '1');   // cleared when the answer for this draft is drawn (tests wait on it)
  publish(false);
  clearTimeout(timer);
  timer = setTimeout(ask, now ? 0 : 120);   // a drop asks at once; a burst of key presses makes one call
  drawStatus();
  drawButtons();
}
// The value (what Check and Submit read) changes at once; the table follows once the problems are drawn, so its
// event does not hold up the problems' call on a busy server.
function publish(tell) {
  props.value = JSON.stringify({task_id: S.task_id, plan: S.plan, locked: S.locked, start: S.start,
                                start_name: S.start_name});
  if (tell !== false) trigger('edit');
}
async function ask() {
  const mine = ++seq, asked = S.plan;
  root.setAttribute('data-busy', '1');
  try {
    const sent = performance.now();
    const answer = await server.draft({task_id: S.task_id, plan: JSON.stringify(S.plan), start: S.start, start_name: S.start_name});
    root.setAttribute('data-call-ms', String(Math.round(performance.now() - sent)));  // read by bench/planner_bench.py
    if (mine !== seq) return;
    if (!answer || typeof answer !== 'object') throw new Error('no answer');
    if (answer.error) { say(answer.error); stale = false; }
    else { S.svg = answer.svg; S.problems = answer.problems; S.summary = answer.summary; stale = false; }
  } catch (err) {
    if (mine !== seq) return;
    stale = true;
    say('The server did not answer (restarted, or the connection dropped): your draft is kept here and in the '
        + 'table. Copy it from "Plan as JSON" and reload the page to go on.');
  } finally {
    if (mine === seq) {
      root.removeAttribute('data-busy');
      if (asked === S.plan) root.removeAttribute('data-pending');  // else an edit came since: its answer is due
      draw();
      trigger('edit');
    }
  }
}
function step(back) {
  const from = back ? undo : redo, to = back ? redo : undo;
  if (!from.length) return;
  to.push(S.plan);
  commit(from.pop(), true);
}

// -- pointer: drag along both axes, click to select ------------------------------------------------------------
host.addEventListener('pointerdown', ev => {
  const r = ev.target.closest && ev.target.closest('rect[data-ship]');
  if (!r || !S) return;
  const id = Number(r.getAttribute('data-ship'));
  const svg = host.querySelector('svg');
  const plot = plotOf(svg);
  const ctm = svg.getScreenCTM();
  if (!plot || !ctm) return;
  ev.preventDefault();
  select(id, true);
  if (S.locked.includes(id)) { say('ship ' + id + ' is locked: unlock it to move it'); setTimeout(refocusSoon, 0); return; }
  host.setPointerCapture(ev.pointerId);
  drag = {id, x: ev.clientX, y: ev.clientY, scale: ctm.a, plot, dh: 0, ds: 0, pointer: ev.pointerId,
          shapes: Array.from(svg.querySelectorAll('[data-ship="' + id + '"]')), start: entry(S.plan, id)};
});
host.addEventListener('pointermove', ev => {
  if (!drag || ev.pointerId !== drag.pointer) return;
  const dh = Math.round((ev.clientX - drag.x) / drag.scale / drag.plot.pxh);
  const ds = Math.round(-(ev.clientY - drag.y) / drag.scale / drag.plot.pxs);
  const rect = root.getBoundingClientRect();
  float.style.display = 'block';
  float.style.left = (ev.clientX - rect.left + 14) + 'px';
  float.style.top = (ev.clientY - rect.top - 30) + 'px';
  if (dh === drag.dh && ds === drag.ds) return;
  if (!drag.lifted) {  // on top while dragged (not on a mere click: moving a node takes its focus away)
    drag.lifted = true;
    drag.shapes.forEach(s => s.parentNode.appendChild(s));
  }
  drag.dh = dh; drag.ds = ds;
  const t = 'translate(' + (dh * drag.plot.pxh) + ' ' + (-ds * drag.plot.pxs) + ')';
  for (const s of drag.shapes) s.setAttribute('transform', t);
  float.textContent = 'ship ' + drag.id + ' · hour ' + (drag.start.berth_hour + dh) + ' · section ' + (drag.start.section + ds);
});
function drop(ev) {
  if (!drag || ev.pointerId !== drag.pointer) return;
  const d = drag;
  drag = null;
  float.style.display = 'none';
  if (d.dh || d.ds) apply(d.id, d.dh, d.ds, 0, true);
  // The keys work on the ship just dropped or clicked (the browser moves the focus as the press ends).
  setTimeout(refocusSoon, 0);
}
host.addEventListener('pointerup', drop);
host.addEventListener('pointercancel', ev => { if (drag) { drag = null; float.style.display = 'none'; draw(); } });

// -- keyboard and buttons ----------------------------------------------------------------------------------------
host.addEventListener('focusin', ev => {
  const r = ev.target.closest && ev.target.closest('rect.ship[data-ship]');
  if (r && Number(r.getAttribute('data-ship')) !== sel) select(Number(r.getAttribute('data-ship')), false);
});
// The keys act on the selected ship while the editor was the last thing used, even when a redraw has left the
// focus on the page's body.
let armed = false;
document.addEventListener('pointerdown', ev => { armed = root.contains(ev.target); }, true);
document.addEventListener('focusin', ev => { if (ev.target !== document.body) armed = root.contains(ev.target); }, true);
document.addEventListener('keydown', ev => {
  if (armed && !root.contains(ev.target) && (ev.target === document.body || ev.target === document.documentElement))
    onKey(ev);
});
root.addEventListener('keydown', ev => onKey(ev));
function onKey(ev) {
  if (!S) return;
  const key = ev.key;
  if ((ev.ctrlKey || ev.metaKey) && (key === 'z' || key === 'Z')) { ev.preventDefault(); step(!ev.shiftKey); return; }
  if ((ev.ctrlKey || ev.metaKey) && (key === 'y')) { ev.preventDefault(); step(false); return; }
  if (sel === null || (!host.contains(ev.target) && root.contains(ev.target))) return;
  const big = ev.shiftKey ? SIX : 1;
  const moves = {ArrowLeft: [-big, 0, 0], ArrowRight: [big, 0, 0], ArrowUp: [0, 1, 0], ArrowDown: [0, -1, 0],
                 '+': [0, 0, 1], '=': [0, 0, 1], '-': [0, 0, -1]};
  if (moves[key]) {
    ev.preventDefault();
    if (apply(sel, ...moves[key])) refocusSoon();
  } else if (key === 'l' || key === 'L') { ev.preventDefault(); toggleLock(); }
  else if (key === 'Escape') { select(null, false); }
}
function refocusSoon() {
  // The chart is drawn again when the server answers: the focus goes back to the selected ship.
  const id = sel;
  const r = host.querySelector('rect.ship[data-ship="' + id + '"]');
  if (r) r.focus({preventScroll: true});
}
function toggleLock() {
  if (sel === null) return;
  S.locked = S.locked.includes(sel) ? S.locked.filter(s => s !== sel) : S.locked.concat([sel]);
  publish();
  draw();
}
// The week at 1x (the whole week in the box), 2x, 3x or 4x its width; the box scrolls sideways to the rest.
let zoom = 1;
function zoomBy(step) {
  zoom = Math.max(1, Math.min(4, zoom + step));
  host.style.setProperty('--pl-zoom', String(zoom));
  say(zoom === 1 ? 'The whole week.' : 'The week at ' + zoom + 'x: scroll the chart sideways for the rest.');
}
root.addEventListener('click', ev => {
  const b = ev.target.closest && ev.target.closest('button[data-act]');
  if (b && S) {
    const act = b.getAttribute('data-act');
    if (act === 'undo') step(true);
    else if (act === 'redo') step(false);
    else if (act === 'reset') { if (!same(S.plan, S.start)) commit(S.start.map(e => Object.assign({}, e))); }
    else if (act === 'lock') toggleLock();
    else if (act === 'zoom+' || act === 'zoom-') zoomBy(act === 'zoom+' ? 1 : -1);
    else if (sel !== null) {
      const n = {'h-6': [-SIX, 0, 0], 'h-1': [-1, 0, 0], 'h+1': [1, 0, 0], 'h+6': [SIX, 0, 0], 's+1': [0, 1, 0],
                 's-1': [0, -1, 0], 'cranes-': [0, 0, -1], 'cranes+': [0, 0, 1]}[act];
      if (n) apply(sel, ...n);
    }
    return;
  }
  const li = ev.target.closest && ev.target.closest('li[data-ship]');
  if (li) select(Number(li.getAttribute('data-ship')), true);
});
// A redraw after an answer puts the keyboard focus back on the selected ship, unless the person is elsewhere.
new MutationObserver(() => {
  if (sel !== null && armed && (!document.activeElement || document.activeElement === document.body)) refocusSoon();
}).observe(host, {childList: true});

load(props.value);
if (!props.value && props.task_id) {
  server.opening(props.task_id).then(v => { if (!S && v) load(v); }).catch(() => say('The chart could not be loaded: reload the page.'));
}
watch('value', () => load(props.value));
