// gpud's local web UI: one read-only page over the daemon's own API (GET only), refreshed every
// 10 s without reloading.
import './style.css';
import { CHART_COMPONENTS, Charts, MetricHistory } from './charts.js';
import { el, fmtAgo, fmtBytes, fmtDuration, fmtTime, healthRank, shortName, stateData,
         worstHealth } from './format.js';

const REFRESH_MS = 10_000;
const EVENTS_WINDOW_S = 24 * 3600;
const EVENTS_LISTED = 300;
// Metric history is fetched in full at start and every few minutes (to follow the server's
// retention), and incrementally in between.
const HISTORY_FULL_S = 24 * 3600;
const HISTORY_RESYNC_MS = 5 * 60_000;
const MACHINE_INFO_MS = 60_000;

const $ = (id) => document.getElementById(id);

const state = {
  machine: null,
  machineAt: 0,
  states: [],
  events: [],
  gpuHealth: [],       // GET /v1/gpus
  lastValues: new Map(),  // GPU key -> the values last read live, with the time of their state
  history: new MetricHistory(),
  historyFullAt: 0,
  lastOk: null,
  refreshes: 0,
};

async function getJSON(path) {
  const res = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`${path}: HTTP ${res.status}, not JSON`);
  }
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}: ${body && body.message}`);
  return body;
}

// ---- machine ----

function renderMachine() {
  const m = state.machine;
  if (!m) return;
  $('host-name').textContent = m.hostname || '';
  document.title = `gpud · ${m.hostname || ''}`;
  $('gpud-version').textContent = m.gpudVersion ? `v${m.gpudVersion}` : '';
  const gpu = m.gpuInfo || {};
  const gpus = Array.isArray(gpu.gpus) ? gpu.gpus.length : 0;
  const boot = m.uptime ? new Date(m.uptime) : null;
  const up = boot && !isNaN(boot) ? fmtDuration((Date.now() - boot) / 1000) : '–';
  const cpu = m.cpuInfo || {};
  const facts = [
    ['Host', m.hostname],
    ['OS', m.osImage],
    ['Kernel', m.kernelVersion],
    ['GPUs', gpus ? `${gpus} × ${gpu.product || 'unknown'}` : 'none detected'],
    ['Driver', m.gpuDriverVersion || '–'],
    ['CUDA', m.cudaVersion || '–'],
    ['Uptime', up],
    ['CPU', cpu.logicalCores ? `${cpu.logicalCores} × ${cpu.type || cpu.architecture || ''}` : '–'],
    ['Memory', m.memoryInfo ? fmtBytes(m.memoryInfo.totalBytes) : '–'],
  ];
  const titles = { Uptime: boot && !isNaN(boot) ? `booted ${fmtTime(boot)}` : undefined,
                   GPUs: gpu.architecture ? `${gpu.manufacturer || ''} ${gpu.architecture}` : undefined };
  const dl = $('machine-info');
  dl.replaceChildren(...facts.map(([k, v]) =>
    el('div', { class: 'fact', 'data-fact': k.toLowerCase(), title: titles[k] },
       el('dt', { text: k }), el('dd', { text: v || '–' }))));
}

// ---- components ----

function renderComponents() {
  const comps = state.states.map((c) => {
    const states = c.states || [];
    const worst = worstHealth(states);
    const main = states.find((s) => s.health === worst) || states[0] || {};
    // Healthy only because something kept it from checking (NVML hung or missing, a GPU lost): a
    // grey "not checked" card, never a green one.
    const unchecked = worst === 'Healthy' ? notChecked(main) : undefined;
    return { name: c.component, health: unchecked ? 'NotChecked' : worst, state: main, unchecked };
  });
  comps.sort((a, b) => healthRank(a.health) - healthRank(b.health) || a.name.localeCompare(b.name));

  const counts = { Unhealthy: 0, Degraded: 0, Initializing: 0, NotChecked: 0, Healthy: 0 };
  for (const c of comps) counts[c.health] = (counts[c.health] || 0) + 1;
  const overall = counts.Unhealthy ? 'Unhealthy' : counts.Degraded ? 'Degraded'
                : counts.Initializing || counts.NotChecked ? 'Initializing' : 'Healthy';
  const o = $('overall');
  o.dataset.health = overall;
  const parts = [];
  if (counts.Unhealthy) parts.push(`${counts.Unhealthy} unhealthy`);
  if (counts.Degraded) parts.push(`${counts.Degraded} degraded`);
  if (counts.Initializing) parts.push(`${counts.Initializing} initializing`);
  if (counts.NotChecked) parts.push(`${counts.NotChecked} not checked`);
  o.textContent = parts.length ? `${parts.join(', ')} of ${comps.length} components`
                               : `all ${comps.length} components healthy`;
  $('components-count').textContent = `${comps.length}`;

  // A fault that made other components unable to check (a lost GPU, NVML hung or missing) is one
  // finding: its card leads a group that holds the components it kept from checking.
  const groups = new Map();  // root cause -> affected components
  for (const c of comps) {
    const root = rootCauseOf(c.state);
    if (!root || root === c.name || !comps.some((x) => x.name === root)) continue;
    if (!groups.has(root)) groups.set(root, []);
    groups.get(root).push(c);
  }
  const grouped = new Set([...groups.values()].flat().map((c) => c.name));
  const children = [];
  for (const c of comps) {
    if (grouped.has(c.name)) continue;
    const affected = groups.get(c.name);
    if (!affected) {
      children.push(card(c));
      continue;
    }
    children.push(el('div', { class: 'group', 'data-root-cause': c.name, 'data-health': c.health },
      el('p', { class: 'group-title',
                text: `Root cause: ${shortName(c.name)} · ${affected.length} component(s) could ` +
                      'not check what it reports' }),
      card(c),
      el('div', { class: 'affected' }, ...affected.map((a) => card(a, true)))));
  }
  $('components').replaceChildren(...children);
}

// What a state could not check, from its extra_info.not_checked (a JSON list of "<what>, see
// <owner>"): 'all' when nothing was checked ("all GPUs: …"), 'part' when some GPUs were not,
// undefined when everything was.
function notChecked(s) {
  const list = notCheckedList(s);
  if (!list || !list.length) return undefined;
  return String(list[0]).startsWith('all GPUs') ? 'all' : 'part';
}

function notCheckedList(s) {
  const raw = s && s.extra_info && s.extra_info.not_checked;
  if (typeof raw !== 'string') return undefined;
  try {
    const list = JSON.parse(raw);
    return Array.isArray(list) ? list : undefined;
  } catch {
    return undefined;
  }
}

// The component a state points at as the reason it could not check something, from its
// extra_info.not_checked ("GPU 3 (0000:5d:00.0) lost, see accelerator-nvidia-info"; "all GPUs: <NVML
// error>" is NVML's, whose faults accelerator-nvidia-info reports); undefined when none.
function rootCauseOf(s) {
  const list = notCheckedList(s);
  if (!list || !list.length) return undefined;
  const m = /see (\S+)$/.exec(String(list[0]));
  return m ? m[1] : 'accelerator-nvidia-info';
}

function card({ name, health, state: s, unchecked }, compact = false) {
  const actions = s.suggested_actions || {};
  const repair = Array.isArray(actions.repair_actions) ? actions.repair_actions : [];
  const stale = staleness(name, s);
  return el('article', { class: compact ? 'card compact' : 'card', 'data-component': name,
                         'data-health': health, 'data-stale': stale ? 'true' : undefined,
                         title: `${name}: ${s.reason || s.error || health}` +
                                (stale ? ` (stale: ${stale})` : '') },
    el('header', {},
       el('h3', { text: shortName(name) }),
       el('span', { class: 'badge', 'data-health': health,
                    text: (unchecked === 'all' ? 'Not checked' : unchecked === 'part' ? 'Partly checked'
                                                                                     : health) +
                          (stale ? ' · stale' : '') })),
    compact ? null : el('p', { class: 'reason', text: s.reason || s.error || '' }),
    !compact && (repair.length || actions.description)
      ? el('p', { class: 'action' },
           el('strong', { text: 'Suggested: ' }),
           repair.length ? el('code', { text: repair.join(', ') }) : null,
           actions.description ? ` ${actions.description}` : null)
      : null);
}

// Why a component's state is stale ("checked 5m ago, every 1m"), or undefined when it is live: a
// state older than two of its component's intervals is not what the component sees now.
function staleness(name, s) {
  const comp = state.states.find((c) => c.component === name);
  const interval = comp && comp.interval_seconds;
  if (!interval || !s || !s.time) return undefined;
  const t = new Date(s.time);
  const age = (Date.now() - t.getTime()) / 1000;
  if (!(age > 2 * interval)) return undefined;
  return `checked ${fmtAgo(t)}, every ${interval < 60 ? `${interval} s` : fmtDuration(interval)}`;
}

// ---- GPUs ----

function gpuRows() {
  const byComp = new Map();
  for (const c of state.states) byComp.set(c.component, stateData((c.states || [])[0]));
  const gpus = new Map();  // bus id -> row
  const row = (g) => {
    const key = g.bus_id || g.uuid;
    if (!key) return null;
    if (!gpus.has(key)) gpus.set(key, { bus_id: g.bus_id, uuid: g.uuid });
    const r = gpus.get(key);
    if (r.index === undefined && g.index !== undefined) r.index = g.index;
    return r;
  };
  const each = (comp, fn) => {
    const d = byComp.get(`accelerator-nvidia-${comp}`);
    if (d && Array.isArray(d.gpus)) for (const g of d.gpus) {
      const r = row(g);
      if (r) fn(r, g);
    }
  };
  each('temperature', (r, g) => { r.temp = g.current_celsius_gpu_core; r.hbm = g.current_celsius_hbm;
                                  r.slowdown = g.threshold_celsius_slowdown; });
  each('power', (r, g) => { r.power = g.usage_milli_watts; r.limit = g.enforced_limit_milli_watts; });
  each('memory', (r, g) => { r.memUsed = g.used_bytes; r.memTotal = g.total_bytes; });
  each('utilization', (r, g) => { r.util = g.gpu_used_percent; r.memUtil = g.memory_used_percent; });
  each('ecc', (r, g) => { if (g.total && g.total.volatile) r.ecc = g.total.volatile;
                          r.eccSupported = g.supported !== false; });
  each('remapped-rows', (r, g) => { r.remap = g; });
  each('persistence-mode', (r, g) => { r.persistence = g; });
  each('nvlink', (r, g) => { r.nvlink = g; });
  // The info component lists every GPU NVML enumerates, a lost one too ("state": "lost").
  each('info', (r, g) => { r.state = g.state; });
  for (const h of state.gpuHealth) {
    const r = row({ bus_id: h.pci_bus_id, uuid: h.uuid, index: h.index });
    if (r) r.health = h;
  }
  // Machine info knows every GPU even before the components' first check.
  const info = state.machine && state.machine.gpuInfo && state.machine.gpuInfo.gpus;
  if (Array.isArray(info)) for (const g of info) {
    const r = row({ bus_id: g.busID, uuid: g.uuid });
    if (r && r.index === undefined && g.minorID !== undefined) r.index = Number(g.minorID);
  }
  return [...gpus.values()].sort((a, b) => (a.index ?? 99) - (b.index ?? 99) ||
                                           String(a.bus_id).localeCompare(String(b.bus_id)));
}

function cell(text, level) {
  return el('td', { text: text ?? '–', 'data-level': level });
}

// Xid events of the last 24 h per GPU bus id ("0000:5d:00", the function left out).
function xidCounts() {
  const counts = new Map();
  for (const e of state.events) {
    if (e.component !== 'accelerator-nvidia-error-xid') continue;
    const bus = busKey((e.extra_info || {}).pci_bus_id);
    if (bus) counts.set(bus, (counts.get(bus) || 0) + 1);
  }
  return counts;
}

function busKey(id) {
  if (!id) return '';
  const m = /^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})/i.exec(String(id).trim());
  if (!m) return '';
  return `${(m[1] || '0000').slice(-4)}:${m[2]}:${m[3]}`.toLowerCase();
}

// The values of a GPU row that came from a live state are remembered; a GPU that cannot be read
// now (lost, NVML hung) shows its last ones drawn as stale, with their age, never as live.
const VALUE_KEYS = ['temp', 'hbm', 'slowdown', 'power', 'limit', 'memUsed', 'memTotal', 'util',
                    'memUtil', 'ecc', 'eccSupported', 'remap', 'persistence', 'nvlink'];

function withLastValues(r, now) {
  const key = r.bus_id || r.uuid;
  const live = VALUE_KEYS.some((k) => r[k] !== undefined);
  if (live && r.state !== 'lost') {
    state.lastValues.set(key, { at: now, values: Object.fromEntries(VALUE_KEYS.map((k) => [k, r[k]])) });
    return r;
  }
  const last = state.lastValues.get(key);
  if (!last) return r;
  return { ...r, ...last.values, staleSince: last.at };
}

function renderGpus() {
  const now = new Date();
  const xids = xidCounts();
  const rows = gpuRows().map((r) => withLastValues(r, now));
  $('gpus-count').textContent = rows.length ? `${rows.length}` : '';
  $('gpus-empty').hidden = rows.length > 0;
  $('gpu-table').hidden = rows.length === 0;
  const num = (v, d = 0) => (typeof v === 'number' ? v.toFixed(d) : undefined);
  $('gpu-table').tBodies[0].replaceChildren(...rows.map((r) => {
    const tempLevel = r.temp !== undefined && r.slowdown > 0
      ? (r.temp >= r.slowdown ? 'bad' : r.temp >= r.slowdown - 5 ? 'warn' : undefined) : undefined;
    const ecc = r.ecc;
    const remap = r.remap;
    const nv = r.nvlink;
    const pm = r.persistence;
    const lost = r.state === 'lost' || r.state === 'reset_required';
    const h = r.health;
    const xid = xids.get(busKey(r.bus_id)) || 0;
    const stale = r.staleSince ? `stale: last read ${fmtAgo(r.staleSince, now)}` : undefined;
    return el('tr', { 'data-gpu': r.bus_id || r.uuid, 'data-state': r.state || 'ok',
                      'data-stale': stale ? 'true' : undefined, title: stale },
      el('td', { class: 'gpu-id', text: r.index !== undefined ? `GPU ${r.index}` : '?',
                 title: r.uuid || '' },
         lost ? el('span', { class: 'lost', text: r.state === 'lost' ? 'LOST' : 'RESET' }) : null),
      el('td', { class: 'gpu-health', 'data-health': h ? h.health : undefined,
                 title: h && h.reasons.length
                   ? h.reasons.map((x) => `${shortName(x.component)}: ${x.reason}`).join('\n')
                   : undefined,
                 text: h ? h.health : '–' }),
      el('td', { class: 'xid-count', text: String(xid), 'data-level': xid ? 'bad' : undefined }),
      cell(r.bus_id),
      cell(r.temp !== undefined ? `${num(r.temp)} °C` + (r.hbm ? ` · HBM ${num(r.hbm)} °C` : '')
                                : undefined, tempLevel),
      cell(r.power !== undefined ? `${num(r.power / 1000)} / ${num(r.limit / 1000)} W` : undefined),
      cell(r.memUsed !== undefined ? `${fmtBytes(r.memUsed)} / ${fmtBytes(r.memTotal)}` : undefined),
      cell(r.util !== undefined ? `${num(r.util)} % · mem ${num(r.memUtil)} %` : undefined),
      ecc ? cell(`${ecc.corrected} corr · ${ecc.uncorrected} uncorr`,
                 ecc.uncorrected > 0 ? 'bad' : ecc.corrected > 0 ? 'warn' : undefined)
          : cell(r.eccSupported === false ? 'n/a' : undefined),
      remap ? (remap.supported === false ? cell('n/a')
        : cell(`${remap.remapped_due_to_uncorrectable_errors ?? 0} uncorr · ` +
               `${remap.remapped_due_to_correctable_errors ?? 0} corr` +
               (remap.remapping_failed ? ' · FAILED' : remap.remapping_pending ? ' · pending' : ''),
               remap.remapping_failed ? 'bad' : remap.remapping_pending ? 'warn' : undefined))
        : cell(undefined),
      pm ? (pm.persistence_mode_supported === false ? cell('n/a')
        : cell(pm.persistence_mode_enabled ? 'on' : 'off',
               pm.persistence_mode_enabled ? undefined : 'warn'))
         : cell(undefined),
      nv ? (nv.supported === false ? cell('n/a')
        : cell(nv.all_feature_enabled ? 'all links up' : 'links down',
               nv.all_feature_enabled ? undefined : 'bad'))
         : cell(undefined));
  }));
}

// ---- events ----

function renderEventFilters() {
  const select = $('filter-component');
  const current = select.value;
  const names = state.states.map((c) => c.component).sort();
  const have = [...select.options].slice(1).map((o) => o.value);
  if (have.join() !== names.join()) {
    select.replaceChildren(el('option', { value: '', text: 'all' }),
                           ...names.map((n) => el('option', { value: n, text: shortName(n) })));
    select.value = names.includes(current) ? current : '';
  }
}

function renderEvents() {
  renderEventFilters();
  const comp = $('filter-component').value;
  const type = $('filter-type').value;
  const shown = state.events.filter((e) => (!comp || e.component === comp) &&
                                           (!type || e.type === type));
  $('events-count').textContent = `${shown.length}` +
    (shown.length !== state.events.length ? ` of ${state.events.length}` : '') +
    (shown.length > EVENTS_LISTED ? ` (newest ${EVENTS_LISTED} listed)` : '');
  $('events-empty').hidden = shown.length > 0;
  const now = new Date();
  // A kernel-log storm can hold thousands of events: list the newest, mark them all on the strip.
  $('events').replaceChildren(...shown.slice(0, EVENTS_LISTED).map((e) => {
    const t = new Date(e.time);
    const extra = e.extra_info || {};
    // Acknowledged with set-healthy: the incident is resolved, kept in the timeline as such.
    const ack = e.acknowledged;
    const resolved = ack
      ? el('span', { class: 'resolved', title: `acknowledged ${ack.time} by ${ack.by}`,
                     text: 'resolved' })
      : null;
    return el('li', { class: 'event', 'data-component': e.component, 'data-type': e.type,
                      'data-pci': extra.pci_bus_id, 'data-resolved': ack ? 'true' : undefined },
      el('span', { class: 'type', 'data-type': e.type, text: e.type }),
      el('time', { dateTime: e.time, title: e.time, text: `${fmtTime(t)} (${fmtAgo(t, now)})` }),
      el('span', { class: 'component', text: shortName(e.component) }),
      el('span', { class: 'message' }, e.message || e.name, resolved));
  }));
  // The strip: one mark per event at its place in the last 24 h.
  const start = now.getTime() - EVENTS_WINDOW_S * 1000;
  $('event-strip').replaceChildren(...shown.map((e) => {
    const x = ((new Date(e.time).getTime() - start) / (EVENTS_WINDOW_S * 1000)) * 100;
    const mark = el('span', { class: 'mark', 'data-type': e.type,
                              'data-resolved': e.acknowledged ? 'true' : undefined,
                              title: `${e.time} ${e.component}: ${e.message || e.name}` +
                                (e.acknowledged ? ' (resolved)' : '') });
    mark.style.left = `${Math.min(100, Math.max(0, x))}%`;
    return mark;
  }));
}

// ---- refresh loop ----

let charts;

async function refreshHistory(now) {
  const comps = CHART_COMPONENTS.join(',');
  const full = now - state.historyFullAt >= HISTORY_RESYNC_MS || state.history.latestTime() === 0;
  let since = HISTORY_FULL_S;
  if (!full) since = Math.max(60, Math.ceil(now / 1000 - state.history.latestTime()) + 30);
  // Unknown chart components (e.g. no NVML on this host) make ?components= fail: ask per list.
  const known = new Set(state.states.map((c) => c.component));
  const wanted = comps.split(',').filter((c) => known.has(c));
  if (!wanted.length) return;
  const data = await getJSON(`/v1/metrics?components=${wanted.join(',')}&since=${since}s`);
  if (full) {
    state.history.clear();
    state.historyFullAt = now;
  }
  state.history.merge(data);
  state.history.trim(Math.floor(now / 1000) - HISTORY_FULL_S);
  const first = state.history.earliestTime();
  $('charts-window').textContent = isFinite(first)
    ? `since ${fmtTime(new Date(first * 1000))}` : '';
  charts.update(state.history);
}

async function refresh() {
  const now = Date.now();
  const banner = $('error-banner');
  try {
    const startTime = Math.floor(now / 1000) - EVENTS_WINDOW_S;
    const machineDue = !state.machine || now - state.machineAt >= MACHINE_INFO_MS;
    const [states, events, machine, gpus] = await Promise.all([
      getJSON('/v1/states'),
      getJSON(`/v1/events?startTime=${startTime}`),
      machineDue ? getJSON('/machine-info').catch(() => state.machine) : state.machine,
      getJSON('/v1/gpus').catch(() => []),
    ]);
    state.gpuHealth = Array.isArray(gpus) ? gpus : [];
    if (machine) {
      state.machine = machine;
      state.machineAt = machineDue ? now : state.machineAt;
    }
    state.states = Array.isArray(states) ? states : [];
    state.events = (Array.isArray(events) ? events : [])
      .flatMap((c) => (c.events || []).map((e) => ({ ...e, component: e.component || c.component })))
      .sort((a, b) => new Date(b.time) - new Date(a.time));
    renderMachine();
    renderComponents();
    renderGpus();
    renderEvents();
    await refreshHistory(now);
    state.lastOk = new Date();
    state.refreshes++;
    document.body.dataset.refreshes = String(state.refreshes);
    banner.hidden = true;
    $('updated').textContent = `updated ${fmtTime(state.lastOk).slice(11)}`;
  } catch (err) {
    banner.hidden = false;
    banner.textContent = `Cannot reach the gpud API (${err.message}). Retrying every 10 s` +
      (state.lastOk ? `; showing data from ${fmtTime(state.lastOk)}.` : '.');
    $('updated').textContent = 'update failed';
  }
}

function loop() {
  refresh().finally(() => setTimeout(loop, REFRESH_MS));
}

document.addEventListener('DOMContentLoaded', () => {
  charts = new Charts($('charts'));
  $('filter-component').addEventListener('change', renderEvents);
  $('filter-type').addEventListener('change', renderEvents);
  loop();
});
