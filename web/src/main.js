// gpud's local web UI: one read-only page over the daemon's own API (GET only), refreshed every
// 10 s without reloading.
import './style.css';
import { CHART_COMPONENTS, Charts, GPU_CHARTS, MetricHistory } from './charts.js';
import { busKey, el, fmtAgo, fmtBytes, fmtDuration, fmtTime, healthRank, shortName,
         worstHealth } from './format.js';

const REFRESH_MS = 10_000;
// The time range the events, the Xid counts, the charts and the drill-down cover.
const RANGES = {
  '1h': { seconds: 3600, short: '1 h', long: 'hour', axis: ['1 h ago', '30 min ago', 'now'] },
  '24h': { seconds: 24 * 3600, short: '24 h', long: '24 hours', axis: ['24 h ago', '12 h ago', 'now'] },
  '7d': { seconds: 7 * 24 * 3600, short: '7 d', long: '7 days', axis: ['7 d ago', '3.5 d ago', 'now'] },
};
const EVENTS_LISTED = 300;
// /v1/events and /v1/metrics answer at most 10,000 rows a page; the page follows this many pages.
const PAGES_FOLLOWED = 20;
// Metric history is fetched in full (the range) at start, when the range changes and every few
// minutes (to follow the server's retention), and incrementally in between.
const HISTORY_RESYNC_MS = 5 * 60_000;
const MACHINE_INFO_MS = 60_000;
const INFO = 'accelerator-nvidia-info';
const XID = 'accelerator-nvidia-error-xid';

const $ = (id) => document.getElementById(id);

const state = {
  range: '24h',
  machine: null,
  machineAt: 0,
  states: [],
  events: [],
  eventsTruncated: false,
  gpuHealth: [],          // GET /v1/gpus
  lastValues: new Map(),  // GPU key -> component -> {at, values}: what was last read live
  history: new MetricHistory(),
  historyFullAt: 0,
  historyRange: '',
  lastOk: null,
  refreshes: 0,
  detail: null,           // the open drill-down: {kind: 'gpu', key} or {kind: 'component', name}
};

const rangeSeconds = () => RANGES[state.range].seconds;

async function getResponse(path) {
  const res = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`${path}: HTTP ${res.status}, not JSON`);
  }
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}: ${body && body.message}`);
  return { body, next: res.headers.get('X-Gpud-Next-Cursor') };
}

async function getJSON(path) {
  return (await getResponse(path)).body;
}

// A paged answer (/v1/events, /v1/metrics: a list of per-component entries) read page by page
// through X-Gpud-Next-Cursor, up to PAGES_FOLLOWED pages; truncated when rows were left.
async function getPaged(path) {
  const entries = [];
  let next = null;
  for (let page = 0; page < PAGES_FOLLOWED; page++) {
    const r = await getResponse(next ? `${path}&cursor=${encodeURIComponent(next)}` : path);
    if (Array.isArray(r.body)) entries.push(...r.body);
    next = r.next;
    if (!next) return { entries, truncated: false };
  }
  return { entries, truncated: true };
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

// ---- what could not be checked (from /v1/gpus) ----

// For each component that could not check some GPU: the GPUs it could not check and the component
// owning the fault that kept it from them (each GPU's blocked_by in /v1/gpus).
function blockedComponents() {
  const out = new Map();  // component -> {owners: Map<owner, count>, gpus: Set<GPU key>}
  for (const g of state.gpuHealth) {
    for (const b of g.blocked_by || []) {
      if (!out.has(b.component)) out.set(b.component, { owners: new Map(), gpus: new Set() });
      const entry = out.get(b.component);
      entry.gpus.add(gpuKey(g));
      entry.owners.set(b.owner, (entry.owners.get(b.owner) || 0) + 1);
    }
  }
  for (const entry of out.values())
    entry.owner = [...entry.owners].sort((x, y) => y[1] - x[1])[0][0];
  return out;
}

// Whether a component state says it could not check something: extra_info.not_checked is present
// only then (its text is for people, not read here).
function saysNotChecked(s) {
  const nc = s && s.extra_info && s.extra_info.not_checked;
  return nc !== undefined && nc !== null;
}

// ---- components ----

function componentModels() {
  const blocked = blockedComponents();
  const gpuCount = state.gpuHealth.length;
  const comps = state.states.map((c) => {
    const states = c.states || [];
    const worst = worstHealth(states);
    const main = states.find((s) => s.health === worst) || states[0] || {};
    // What it could not check: every GPU ('all'), some ('part'), or something /v1/gpus does not
    // list (no GPU entry: a host component, or NVML never answered) which counts as 'all'.
    const b = blocked.get(c.component);
    let unchecked;
    let root;
    if (b && b.owner !== c.component) {
      unchecked = b.gpus.size >= gpuCount ? 'all' : 'part';
      root = b.owner;
    } else if (saysNotChecked(main)) {
      unchecked = 'all';
    }
    // Healthy (or not judged yet) only because something kept it from checking: a grey "not
    // checked" card, never a green one.
    const grey = unchecked && (worst === 'Healthy' || worst === 'Initializing');
    return { name: c.component, health: grey ? 'NotChecked' : worst, state: main, unchecked, root,
             blockedGpus: b ? b.gpus : new Set() };
  });
  comps.sort((a, b) => healthRank(a.health) - healthRank(b.health) || a.name.localeCompare(b.name));
  return comps;
}

function renderComponents() {
  const comps = componentModels();
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

  // A fault that made other components unable to check (a lost GPU, NVML hung) is one finding:
  // its card leads a group that holds the components it kept from checking (/v1/gpus blocked_by).
  const groups = new Map();  // root cause -> affected components
  for (const c of comps) {
    if (!c.root || !comps.some((x) => x.name === c.root)) continue;
    if (!groups.has(c.root)) groups.set(c.root, []);
    groups.get(c.root).push(c);
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

function badgeText(health, unchecked) {
  if (health === 'NotChecked') return unchecked === 'part' ? 'Partly checked' : 'Not checked';
  return health;
}

function card({ name, health, state: s, unchecked }, compact = false) {
  const actions = s.suggested_actions || {};
  const repair = Array.isArray(actions.repair_actions) ? actions.repair_actions : [];
  const stale = staleness(name, s);
  const open = el('button', { type: 'button', class: 'card-open', text: shortName(name),
                              'aria-haspopup': 'dialog',
                              'aria-label': `${shortName(name)}: open its state and events` });
  open.addEventListener('click', (e) => {
    e.stopPropagation();
    openDetail({ kind: 'component', name });
  });
  const article = el('article', { class: compact ? 'card compact' : 'card', 'data-component': name,
                                  'data-health': health, 'data-stale': stale ? 'true' : undefined,
                                  title: `${name}: ${s.reason || s.error || health}` +
                                         (stale ? ` (stale: ${stale})` : '') },
    el('header', {},
       el('h3', {}, open),
       el('span', { class: 'badge', 'data-health': health,
                    text: badgeText(health, unchecked) + (stale ? ' · stale' : '') })),
    compact ? null : el('p', { class: 'reason', text: s.reason || s.error || '' }),
    !compact && (repair.length || actions.description)
      ? el('p', { class: 'action' },
           el('strong', { text: 'Suggested: ' }),
           repair.length ? el('code', { text: repair.join(', ') }) : null,
           actions.description ? ` ${actions.description}` : null)
      : null);
  // The whole card opens it for a pointer; the button is the keyboard's way.
  article.addEventListener('click', () => openDetail({ kind: 'component', name }));
  return article;
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

// The components whose per-GPU values the table shows (their rows in /v1/gpus "values").
const TABLE_COMPONENTS = ['temperature', 'power', 'memory', 'utilization', 'ecc', 'remapped-rows',
                          'persistence-mode', 'nvlink'].map((c) => `accelerator-nvidia-${c}`);

function gpuKey(g) {
  return busKey(g.pci_bus_id || g.bus_id) || g.uuid || `index ${g.index}`;
}

// One row per GPU: /v1/gpus (health, findings, what blocked its checks, each component's values),
// and the GPUs /machine-info lists that /v1/gpus does not (before the first check).
function gpuRows() {
  const rows = new Map();
  for (const g of state.gpuHealth) {
    rows.set(gpuKey(g), { key: gpuKey(g), index: g.index, uuid: g.uuid, bus_id: g.pci_bus_id,
                          health: g, values: g.values || {}, blocked: g.blocked_by || [] });
  }
  const info = state.machine && state.machine.gpuInfo && state.machine.gpuInfo.gpus;
  if (Array.isArray(info)) for (const m of info) {
    const key = gpuKey({ pci_bus_id: m.busID, uuid: m.uuid });
    if (rows.has(key)) continue;
    rows.set(key, { key, index: m.minorID !== '' && m.minorID !== undefined ? Number(m.minorID)
                                                                            : undefined,
                    uuid: m.uuid, bus_id: m.busID, values: {}, blocked: [] });
  }
  return [...rows.values()].sort((a, b) => (a.index ?? 99) - (b.index ?? 99) ||
                                           String(a.bus_id).localeCompare(String(b.bus_id)));
}

// A GPU's value of a component is live when the component read it now (it has a row for the GPU
// and was not blocked from it); the table remembers live values so that a GPU that cannot be read
// now (lost, NVML not answering) shows its last ones drawn stale, with their age, never as live.
function withLastValues(r, now) {
  const blockedFrom = new Set(r.blocked.map((b) => b.component));
  const remembered = state.lastValues.get(r.key) || new Map();
  state.lastValues.set(r.key, remembered);
  const shown = {};
  const staleSince = {};
  // The info component's row too: the GPU's identity (serial, VBIOS) for its drill-down.
  for (const comp of [...TABLE_COMPONENTS, INFO]) {
    const v = r.values[comp];
    // The owner's row of a GPU whose call hung says so and reads nothing: not a reading.
    const hungRow = comp === INFO && v && v.state === 'hung';
    if (v && !blockedFrom.has(comp) && !hungRow) {
      remembered.set(comp, { at: now, values: v });
      shown[comp] = v;
    } else if (remembered.has(comp)) {
      shown[comp] = remembered.get(comp).values;
      staleSince[comp] = remembered.get(comp).at;
    }
  }
  const live = TABLE_COMPONENTS.some((c) => shown[c] && !staleSince[c]);
  return { ...r, shown, staleSince, live };
}

// What the table says of a GPU besides its values: 'lost' / 'reset_required' / 'hung' (the info
// component's per-GPU state; 'hung': the NVML call that hung the driver was reading this GPU),
// 'not-answering' (no component could read it now: each was blocked, e.g. NVML is not answering),
// or 'ok'.
function gpuCondition(r) {
  const infoState = (r.values[INFO] || {}).state;
  if (infoState === 'lost' || infoState === 'reset_required' || infoState === 'hung') return infoState;
  if (r.blocked.length && !r.live) return 'not-answering';
  return 'ok';
}

const CONDITION_TAGS = { lost: 'LOST', reset_required: 'RESET', hung: 'HUNG',
                         'not-answering': 'NOT ANSWERING' };

function cell(text, level, stale) {
  return el('td', { text: text ?? '–', 'data-level': level,
                    'data-stale': stale ? 'true' : undefined });
}

// Whether an event is about GPU `r`: its bus id, UUID or (naming neither) index is the GPU's.
function eventOfGpu(e, r) {
  const x = e.extra_info || {};
  const bus = busKey(x.pci_bus_id || x.device_bus_id);
  if (bus) return bus === busKey(r.bus_id);
  const uuid = x.gpu_uuid || x.device_uuid;
  if (uuid) return uuid === r.uuid;
  return x.gpu_index !== undefined && x.gpu_index !== '' && Number(x.gpu_index) === r.index;
}

// Xid events in the range per GPU bus key.
function xidCounts() {
  const counts = new Map();
  for (const e of state.events) {
    if (e.component !== XID) continue;
    const bus = busKey((e.extra_info || {}).pci_bus_id);
    if (bus) counts.set(bus, (counts.get(bus) || 0) + 1);
  }
  return counts;
}

const num = (v, d = 0) => (typeof v === 'number' ? v.toFixed(d) : undefined);

function renderGpus() {
  const now = new Date();
  const xids = xidCounts();
  const rows = gpuRows().map((r) => withLastValues(r, now));
  $('gpus-count').textContent = rows.length ? `${rows.length}` : '';
  $('gpus-empty').hidden = rows.length > 0;
  $('gpu-table').hidden = rows.length === 0;
  $('gpu-table').tBodies[0].replaceChildren(...rows.map((r) => {
    const v = (c) => r.shown[`accelerator-nvidia-${c}`];
    const st = (c) => r.staleSince[`accelerator-nvidia-${c}`] !== undefined;
    const t = v('temperature');
    const p = v('power');
    const m = v('memory');
    const u = v('utilization');
    const ecc = v('ecc');
    const remap = v('remapped-rows');
    const pm = v('persistence-mode');
    const nv = v('nvlink');
    const temp = t && t.current_celsius_gpu_core;
    const slowdown = t && t.threshold_celsius_slowdown;
    const tempLevel = typeof temp === 'number' && slowdown > 0
      ? (temp >= slowdown ? 'bad' : temp >= slowdown - 5 ? 'warn' : undefined) : undefined;
    const vol = ecc && ecc.total && ecc.total.volatile;
    const condition = gpuCondition(r);
    const h = r.health;
    const xid = xids.get(busKey(r.bus_id)) || 0;
    const staleTimes = TABLE_COMPONENTS.filter((c) => r.staleSince[c] !== undefined)
      .map((c) => r.staleSince[c]);
    const oldest = staleTimes.length ? new Date(Math.min(...staleTimes)) : undefined;
    const stale = oldest ? `stale: last read ${fmtAgo(oldest, now)}` : undefined;
    const open = el('button', { type: 'button', class: 'gpu-open', 'aria-haspopup': 'dialog',
                                text: r.index !== undefined ? `GPU ${r.index}` : '?',
                                title: r.uuid || '' });
    open.addEventListener('click', (e) => {
      e.stopPropagation();
      openDetail({ kind: 'gpu', key: r.key });
    });
    const tr = el('tr', { 'data-gpu': r.bus_id || r.uuid, 'data-key': r.key, 'data-state': condition,
                          'data-stale': stale ? 'true' : undefined, title: stale },
      el('td', { class: 'gpu-id' }, open,
         CONDITION_TAGS[condition]
           ? el('span', { class: 'tag', 'data-state': condition, text: CONDITION_TAGS[condition] })
           : null),
      el('td', { class: 'gpu-health', 'data-health': h ? h.health : undefined,
                 title: h && h.reasons.length
                   ? h.reasons.map((x) => `${shortName(x.component)}: ${x.reason}`).join('\n')
                   : undefined,
                 text: h ? h.health : '–' }),
      el('td', { class: 'xid-count', text: String(xid), 'data-level': xid ? 'bad' : undefined }),
      cell(r.bus_id),
      cell(typeof temp === 'number'
             ? `${num(temp)} °C` + (t.current_celsius_hbm ? ` · HBM ${num(t.current_celsius_hbm)} °C` : '')
             : undefined, tempLevel, st('temperature')),
      cell(p && typeof p.usage_milli_watts === 'number'
             ? `${num(p.usage_milli_watts / 1000)} / ${num(p.enforced_limit_milli_watts / 1000)} W`
             : undefined, undefined, st('power')),
      cell(m && typeof m.used_bytes === 'number' ? `${fmtBytes(m.used_bytes)} / ${fmtBytes(m.total_bytes)}`
                                                 : undefined, undefined, st('memory')),
      cell(u && typeof u.gpu_used_percent === 'number'
             ? `${num(u.gpu_used_percent)} % · mem ${num(u.memory_used_percent)} %` : undefined,
           undefined, st('utilization')),
      vol ? cell(`${vol.corrected} corr · ${vol.uncorrected} uncorr`,
                 vol.uncorrected > 0 ? 'bad' : vol.corrected > 0 ? 'warn' : undefined, st('ecc'))
          : cell(ecc && ecc.supported === false ? 'n/a' : undefined, undefined, st('ecc')),
      remap ? (remap.supported === false ? cell('n/a', undefined, st('remapped-rows'))
        : cell(`${remap.remapped_due_to_uncorrectable_errors ?? 0} uncorr · ` +
               `${remap.remapped_due_to_correctable_errors ?? 0} corr` +
               (remap.remapping_failed ? ' · FAILED' : remap.remapping_pending ? ' · pending' : ''),
               remap.remapping_failed ? 'bad' : remap.remapping_pending ? 'warn' : undefined,
               st('remapped-rows')))
        : cell(undefined),
      pm ? (pm.persistence_mode_supported === false ? cell('n/a', undefined, st('persistence-mode'))
        : cell(pm.persistence_mode_enabled ? 'on' : 'off',
               pm.persistence_mode_enabled ? undefined : 'warn', st('persistence-mode')))
         : cell(undefined),
      nv ? (nv.supported === false ? cell('n/a', undefined, st('nvlink'))
        : cell(nv.all_feature_enabled ? 'all links up' : 'links down',
               nv.all_feature_enabled ? undefined : 'bad', st('nvlink')))
         : cell(undefined));
    tr.addEventListener('click', () => openDetail({ kind: 'gpu', key: r.key }));
    return tr;
  }));
  state.rows = rows;
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

// One timeline entry.
function eventItem(e, now) {
  const t = new Date(e.time);
  const extra = e.extra_info || {};
  // Acknowledged with set-healthy: the incident is resolved, kept in the timeline as such.
  const ack = e.acknowledged;
  const resolved = ack
    ? el('span', { class: 'resolved', title: `acknowledged ${ack.time} by ${ack.by}`,
                   text: 'resolved' })
    : null;
  return el('li', { class: 'event', 'data-component': e.component, 'data-name': e.name,
                    'data-type': e.type, 'data-pci': extra.pci_bus_id,
                    'data-resolved': ack ? 'true' : undefined },
    el('span', { class: 'type', 'data-type': e.type, text: e.type }),
    el('time', { dateTime: e.time, title: e.time, text: `${fmtTime(t)} (${fmtAgo(t, now)})` }),
    el('span', { class: 'component', text: shortName(e.component) }),
    el('span', { class: 'message' }, e.message || e.name, resolved));
}

// The strip: one mark per event at its place in the range.
function eventStrip(events, now) {
  const span = rangeSeconds() * 1000;
  const start = now.getTime() - span;
  const strip = el('div', { class: 'strip', 'aria-hidden': 'true' });
  strip.replaceChildren(...events.map((e) => {
    const x = ((new Date(e.time).getTime() - start) / span) * 100;
    const mark = el('span', { class: 'mark', 'data-type': e.type,
                              'data-resolved': e.acknowledged ? 'true' : undefined,
                              title: `${e.time} ${e.component}: ${e.message || e.name}` +
                                (e.acknowledged ? ' (resolved)' : '') });
    mark.style.left = `${Math.min(100, Math.max(0, x))}%`;
    return mark;
  }));
  return strip;
}

function stripAxis() {
  return el('div', { class: 'strip-axis', 'aria-hidden': 'true' },
            ...RANGES[state.range].axis.map((t) => el('span', { text: t })));
}

function renderEvents() {
  renderEventFilters();
  const comp = $('filter-component').value;
  const type = $('filter-type').value;
  const shown = state.events.filter((e) => (!comp || e.component === comp) &&
                                           (!type || e.type === type));
  $('events-count').textContent = `${shown.length}` +
    (shown.length !== state.events.length ? ` of ${state.events.length}` : '') +
    (state.eventsTruncated ? ` (the API has more than ${PAGES_FOLLOWED} pages; not all read)` : '') +
    (shown.length > EVENTS_LISTED ? ` (newest ${EVENTS_LISTED} listed)` : '');
  $('events-empty').hidden = shown.length > 0;
  const now = new Date();
  // A kernel-log storm can hold thousands of events: list the newest, mark them all on the strip.
  $('events').replaceChildren(...shown.slice(0, EVENTS_LISTED).map((e) => eventItem(e, now)));
  $('event-strip').replaceChildren(...eventStrip(shown, now).childNodes);
  $('strip-axis').replaceChildren(...stripAxis().childNodes);
}

// ---- time range ----

function renderRange() {
  const r = RANGES[state.range];
  for (const b of document.querySelectorAll('#range button'))
    b.setAttribute('aria-pressed', String(b.dataset.range === state.range));
  for (const e of document.querySelectorAll('.range-short')) e.textContent = r.short;
  for (const e of document.querySelectorAll('.range-long')) e.textContent = r.long;
  document.body.dataset.range = state.range;
}

function setRange(range) {
  if (!RANGES[range] || range === state.range) return;
  state.range = range;
  renderRange();
  // Refetched for the new range at once (events, and the charts' history in full).
  refreshSoon();
}

// ---- drill-down ----

let detailCharts = null;  // {key, charts, box}: the open GPU's charts, kept across refreshes

// The button that opens `what` (the table and the cards are redrawn every refresh: found anew).
function openerOf(what) {
  return what.kind === 'gpu'
    ? document.querySelector(`#gpu-table tr[data-key="${CSS.escape(what.key)}"] .gpu-open`)
    : document.querySelector(`#components .card[data-component="${CSS.escape(what.name)}"] .card-open`);
}

function dropDetailCharts() {
  if (detailCharts) detailCharts.charts.destroy();
  detailCharts = null;
}

function openDetail(what) {
  state.detail = what;
  dropDetailCharts();
  renderDetail();
  $('detail').hidden = false;
  $('detail-close').focus();
}

function closeDetail() {
  const what = state.detail;
  if (!what) return;
  state.detail = null;
  $('detail').hidden = true;
  dropDetailCharts();
  $('detail-body').replaceChildren();
  // The focus goes back to what opened the panel.
  const opener = openerOf(what);
  if (opener) opener.focus();
}

function section(title, ...children) {
  return el('section', { class: 'detail-section', 'data-section': title.toLowerCase() },
            el('h3', { text: title }), ...children);
}

function factList(pairs) {
  return el('dl', { class: 'facts detail-facts' },
            ...pairs.map(([k, v, key]) => el('div', { class: 'fact', 'data-fact': key },
                                              el('dt', { text: k }), el('dd', { text: v ?? '–' }))));
}

function eventList(events, emptyText) {
  const now = new Date();
  if (!events.length) return [el('p', { class: 'empty', text: emptyText })];
  return [eventStrip(events, now), stripAxis(),
          el('ol', { class: 'events' }, ...events.slice(0, EVENTS_LISTED).map((e) => eventItem(e, now)))];
}

// A component's per-GPU values as rows of "key: value" (nested objects and lists of objects
// flattened: "total.volatile.corrected", "links[3].replay_errors").
function valueRows(v, key = '') {
  if (v && typeof v === 'object' && !Array.isArray(v))
    return Object.entries(v).flatMap(([k, x]) => valueRows(x, key ? `${key}.${k}` : k));
  if (Array.isArray(v) && v.some((x) => x && typeof x === 'object'))
    return v.flatMap((x, i) => valueRows(x, `${key}[${i}]`));
  if (Array.isArray(v)) return [[key, v.length ? v.join(', ') : '(none)']];
  return [[key, v === null ? 'not read' : String(v)]];
}

function renderDetail() {
  const d = state.detail;
  if (!d) return;
  // A refresh redraws the panel: the value groups the reader opened stay open.
  const open = new Set([...$('detail-body').querySelectorAll('details[open]')]
    .map((e) => e.dataset.component));
  if (d.kind === 'gpu') renderGpuDetail(d.key);
  else renderComponentDetail(d.name);
  for (const e of $('detail-body').querySelectorAll('details'))
    if (open.has(e.dataset.component)) e.open = true;
}

function renderGpuDetail(key) {
  const r = (state.rows || []).find((x) => x.key === key);
  const panel = $('detail');
  panel.dataset.kind = 'gpu';
  panel.dataset.gpu = r ? r.bus_id || r.uuid : key;
  delete panel.dataset.component;
  if (!r) {
    $('detail-title').textContent = 'GPU no longer listed';
    $('detail-body').replaceChildren(el('p', { class: 'empty', text: `${key} is not in /v1/gpus now.` }));
    return;
  }
  const condition = gpuCondition(r);
  panel.dataset.state = condition;
  const health = r.health ? r.health.health : 'Initializing';
  $('detail-title').textContent = `GPU ${r.index ?? '?'}` +
    (CONDITION_TAGS[condition] ? ` · ${CONDITION_TAGS[condition]}` : '');
  const badge = $('detail-badge');
  badge.dataset.health = health;
  badge.textContent = health;

  // Identity: /v1/gpus, the info component's row (the last one read while NVML does not answer),
  // /machine-info.
  const info = r.shown[INFO] || {};
  const mi = ((state.machine && state.machine.gpuInfo && state.machine.gpuInfo.gpus) || [])
    .find((m) => gpuKey({ pci_bus_id: m.busID, uuid: m.uuid }) === r.key) || {};
  const identity = factList([
    ['UUID', r.uuid || mi.uuid, 'uuid'],
    ['Serial', info.serial || mi.sn || undefined, 'serial'],
    ['Bus ID', r.bus_id || mi.busID, 'bus-id'],
    ['VBIOS', info.vbios_version, 'vbios'],
    ['Product', info.name || (state.machine && state.machine.gpuInfo && state.machine.gpuInfo.product),
     'product'],
    ['Board ID', info.board_id ?? mi.boardID, 'board-id'],
    ['Minor number', info.minor_number ?? mi.minorID, 'minor'],
    // The state as read now, never a remembered one.
    ['NVML state', condition === 'not-answering' ? 'not answering'
      : condition === 'hung' ? `hung in ${(r.values[INFO] || {}).call || 'an NVML call'}`
      : (r.values[INFO] || {}).state, 'state'],
  ]);

  // Findings from every component: the GPU's causes, then what could not check it.
  const reasons = (r.health && r.health.reasons) || [];
  const findings = reasons.length
    ? el('ul', { class: 'findings' }, ...reasons.map((x) =>
        el('li', { class: 'finding', 'data-component': x.component, 'data-health': x.health },
           el('span', { class: 'badge', 'data-health': x.health, text: x.health }),
           el('strong', { text: shortName(x.component) }),
           el('span', { class: 'finding-reason', text: x.reason }),
           x.suggested_action ? el('code', { text: x.suggested_action }) : null)))
    : el('p', { class: 'empty', text: 'No component has a finding about this GPU.' });
  // What could not check it, one line per fault: the components it kept from this GPU.
  const faults = new Map();  // owner + reason -> {owner, reason, components}
  for (const b of r.blocked) {
    const k = `${b.owner}\n${b.reason}`;
    if (!faults.has(k)) faults.set(k, { owner: b.owner, reason: b.reason, components: [] });
    faults.get(k).components.push(b.component);
  }
  const blocked = faults.size
    ? el('ul', { class: 'findings' }, ...[...faults.values()].map((f) =>
        el('li', { class: 'finding', 'data-health': 'NotChecked', 'data-owner': f.owner,
                   'data-components': f.components.join(' ') },
           el('span', { class: 'badge', 'data-health': 'NotChecked', text: 'Not checked' }),
           el('strong', { text: `by ${f.components.length} component(s)` }),
           el('span', { class: 'finding-reason',
                        text: `${f.reason} (the finding of ${shortName(f.owner)}): ` +
                              f.components.map(shortName).join(', ') }))))
    : null;

  // Every component's values for this GPU (the live ones; a remembered one is marked stale).
  const valueComps = Object.keys(r.values).sort();
  const values = valueComps.length
    ? el('div', { class: 'values' }, ...valueComps.map((comp) => {
        const blockedNow = r.blocked.some((b) => b.component === comp);
        return el('details', { class: 'value-group', 'data-component': comp },
          el('summary', { text: shortName(comp) + (blockedNow ? ' (not checked now)' : '') }),
          el('table', { class: 'kv' }, el('tbody', {},
            ...valueRows(r.values[comp]).map(([k, v]) => el('tr', {}, el('th', { text: k }),
                                                             el('td', { text: v }))))));
      }))
    : el('p', { class: 'empty', text: 'No component read a value of this GPU now.' });
  const remembered = Object.entries(r.staleSince).filter(([c]) => c !== INFO);
  const staleNote = remembered.length
    ? el('p', { class: 'stale-note', text: `The table shows the last values read of ` +
        `${remembered.map(([c]) => shortName(c)).join(', ')} ` +
        `(${fmtAgo(new Date(Math.min(...remembered.map(([, t]) => t))))}), drawn stale.` })
    : null;

  // Its events: the ones naming this GPU, and those of the components that could not check it
  // because of a fault that names no single GPU (NVML not answering).
  const owners = new Set(r.blocked.map((b) => b.owner));
  const events = state.events.filter((e) => eventOfGpu(e, r) ||
    (owners.has(e.component) && !eventNamesAGpu(e)));

  if (!detailCharts || detailCharts.key !== r.key) {
    dropDetailCharts();
    const box = el('div', { class: 'charts detail-charts' });
    detailCharts = { key: r.key, box, charts: new Charts(box, {
      specs: GPU_CHARTS, filter: (s) => seriesOfGpu(s, r),
      emptyText: 'no samples of this GPU in the range' }) };
  }
  $('detail-body').replaceChildren(
    section('Identity', identity),
    section('Findings', findings, blocked),
    section('Values', staleNote, values),
    section(`Events, last ${RANGES[state.range].long}`, ...eventList(events, 'No event about this GPU in the range.')),
    section(`Charts, last ${RANGES[state.range].long}`, detailCharts.box));
  detailCharts.charts.update(state.history);
}

function eventNamesAGpu(e) {
  const x = e.extra_info || {};
  return Boolean(x.pci_bus_id || x.device_bus_id || x.gpu_uuid || x.device_uuid ||
                 (x.gpu_index !== undefined && x.gpu_index !== ''));
}

// A metric series of GPU `r`: labelled with its UUID or bus id (gpu=<index> where it has neither).
function seriesOfGpu(s, r) {
  const l = s.labels || {};
  if (l.uuid) return l.uuid === r.uuid;
  if (l.pci_bus_id) return busKey(l.pci_bus_id) === busKey(r.bus_id);
  return l.gpu !== undefined && Number(l.gpu) === r.index;
}

function renderComponentDetail(name) {
  const model = componentModels().find((c) => c.name === name);
  const panel = $('detail');
  panel.dataset.kind = 'component';
  panel.dataset.component = name;
  delete panel.dataset.gpu;
  delete panel.dataset.state;
  $('detail-title').textContent = shortName(name);
  const badge = $('detail-badge');
  if (!model) {
    badge.textContent = '';
    $('detail-body').replaceChildren(el('p', { class: 'empty', text: `${name} is not in /v1/states now.` }));
    return;
  }
  badge.dataset.health = model.health;
  badge.textContent = badgeText(model.health, model.unchecked);
  const s = model.state;
  const actions = s.suggested_actions || {};
  const repair = Array.isArray(actions.repair_actions) ? actions.repair_actions : [];
  const comp = state.states.find((c) => c.component === name) || {};
  const stateFacts = factList([
    ['Health', s.health, 'health'],
    ['Checked', s.time ? `${fmtTime(new Date(s.time))} (${fmtAgo(new Date(s.time))})` : undefined, 'time'],
    ['Interval', comp.interval_seconds ? `${comp.interval_seconds} s` : undefined, 'interval'],
    ['Suggested', repair.length ? repair.join(', ') : 'none', 'suggested'],
  ]);
  const reason = el('p', { class: 'detail-reason', text: s.reason || s.error || '' });
  // The GPUs it has a finding about, and those it could not check (from /v1/gpus).
  const gpuItems = [];
  const keptFrom = new Map();  // for a fault's owner: component -> the GPUs it kept it from
  for (const g of state.gpuHealth) {
    for (const x of g.reasons || []) if (x.component === name)
      gpuItems.push(el('li', { class: 'finding', 'data-gpu': g.pci_bus_id, 'data-health': x.health },
        el('span', { class: 'badge', 'data-health': x.health, text: x.health }),
        el('strong', { text: `GPU ${g.index}` }), el('span', { class: 'finding-reason', text: x.reason }),
        x.suggested_action ? el('code', { text: x.suggested_action }) : null));
    for (const b of g.blocked_by || []) {
      if (b.component === name)
        gpuItems.push(el('li', { class: 'finding', 'data-gpu': g.pci_bus_id, 'data-health': 'NotChecked' },
          el('span', { class: 'badge', 'data-health': 'NotChecked', text: 'Not checked' }),
          el('strong', { text: `GPU ${g.index}` }),
          el('span', { class: 'finding-reason', text: `${b.reason} (the finding of ${shortName(b.owner)})` })));
      if (b.owner === name && b.component !== name) {
        if (!keptFrom.has(b.component)) keptFrom.set(b.component, []);
        keptFrom.get(b.component).push(`GPU ${g.index}`);
      }
    }
  }
  const kept = keptFrom.size
    ? section('Kept from checking',
              el('ul', { class: 'findings' }, ...[...keptFrom].map(([c, list]) =>
                el('li', { class: 'finding', 'data-component': c, 'data-health': 'NotChecked' },
                   el('strong', { text: shortName(c) }),
                   el('span', { class: 'finding-reason', text: list.join(', ') })))))
    : null;
  const events = state.events.filter((e) => e.component === name);
  $('detail-body').replaceChildren(
    section('State', reason, stateFacts,
            actions.description ? el('p', { class: 'action', text: actions.description }) : null),
    gpuItems.length ? section('GPUs', el('ul', { class: 'findings' }, ...gpuItems)) : null,
    kept,
    section(`Events, last ${RANGES[state.range].long}`,
            ...eventList(events, `No event of ${shortName(name)} in the range.`)));
}

// ---- refresh loop ----

let charts;

async function refreshHistory(now) {
  const span = rangeSeconds();
  const full = now - state.historyFullAt >= HISTORY_RESYNC_MS || state.history.latestTime() === 0 ||
               state.historyRange !== state.range;
  let since = span;
  if (!full) since = Math.max(60, Math.ceil(now / 1000 - state.history.latestTime()) + 30);
  // Unknown chart components (e.g. no NVML on this host) make ?components= fail: ask per list.
  const known = new Set(state.states.map((c) => c.component));
  const wanted = CHART_COMPONENTS.filter((c) => known.has(c));
  if (!wanted.length) return;
  const { entries } = await getPaged(`/v1/metrics?components=${wanted.join(',')}&since=${since}s`);
  if (full) {
    state.history.clear();
    state.historyFullAt = now;
    state.historyRange = state.range;
  }
  state.history.merge(entries);
  state.history.trim(Math.floor(now / 1000) - span);
  const first = state.history.earliestTime();
  $('charts-window').textContent = isFinite(first)
    ? `since ${fmtTime(new Date(first * 1000))}` : '';
  charts.update(state.history);
  if (detailCharts) detailCharts.charts.update(state.history);
}

async function refresh() {
  const now = Date.now();
  const banner = $('error-banner');
  try {
    const startTime = Math.floor(now / 1000) - rangeSeconds();
    const machineDue = !state.machine || now - state.machineAt >= MACHINE_INFO_MS;
    const [states, events, machine, gpus] = await Promise.all([
      getJSON('/v1/states'),
      getPaged(`/v1/events?startTime=${startTime}`),
      machineDue ? getJSON('/machine-info').catch(() => state.machine) : state.machine,
      getJSON('/v1/gpus').catch(() => []),
    ]);
    state.gpuHealth = Array.isArray(gpus) ? gpus : [];
    if (machine) {
      state.machine = machine;
      state.machineAt = machineDue ? now : state.machineAt;
    }
    state.states = Array.isArray(states) ? states : [];
    state.events = events.entries
      .flatMap((c) => (c.events || []).map((e) => ({ ...e, component: e.component || c.component })))
      .sort((a, b) => new Date(b.time) - new Date(a.time));
    state.eventsTruncated = events.truncated;
    renderMachine();
    renderComponents();
    renderGpus();
    renderEvents();
    renderDetail();
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

// One refresh at a time: the loop's every REFRESH_MS, and one at once when the range changes.
let timer = null;
let running = null;
let again = false;

function loop() {
  timer = null;
  running = refresh().finally(() => {
    running = null;
    if (again) {
      again = false;
      loop();
    } else {
      timer = setTimeout(loop, REFRESH_MS);
    }
  });
}

function refreshSoon() {
  if (running) {
    again = true;
    return;
  }
  if (timer) clearTimeout(timer);
  loop();
}

document.addEventListener('DOMContentLoaded', () => {
  charts = new Charts($('charts'));
  renderRange();
  $('filter-component').addEventListener('change', renderEvents);
  $('filter-type').addEventListener('change', renderEvents);
  for (const b of document.querySelectorAll('#range button'))
    b.addEventListener('click', () => setRange(b.dataset.range));
  $('detail-close').addEventListener('click', closeDetail);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && state.detail) closeDetail();
  });
  loop();
});
