// Small pure helpers shared by the page's sections.

// NotChecked: Healthy (or Initializing) only because something kept the component from checking
// (the page's own label; the API says Healthy with extra_info.not_checked).
export const HEALTH_ORDER = { Unhealthy: 0, Degraded: 1, Initializing: 2, NotChecked: 3, Healthy: 4 };

export function healthRank(h) {
  return h in HEALTH_ORDER ? HEALTH_ORDER[h] : 2;
}

// The worst health among a component's states (a component reports one state, but the API allows
// several).
export function worstHealth(states) {
  let worst = 'Healthy';
  for (const s of states || []) if (healthRank(s.health) < healthRank(worst)) worst = s.health;
  return states && states.length ? worst : 'Initializing';
}

export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('data-') || k === 'title' || k === 'role' || k.startsWith('aria-'))
      e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

export function fmtBytes(n) {
  if (typeof n !== 'number' || !isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function fmtDuration(seconds) {
  if (!isFinite(seconds) || seconds < 0) return '–';
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  return `${m}m`;
}

export function fmtTime(date) {
  const pad = (x) => String(x).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
         `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

export function fmtAgo(date, now = new Date()) {
  const s = Math.max(0, (now - date) / 1000);
  if (s < 60) return `${Math.floor(s)} s ago`;
  return `${fmtDuration(s)} ago`;
}

// Splits "accelerator-nvidia-error-xid" into a short title and keeps the full name for reference.
export function shortName(component) {
  return component.replace(/^accelerator-nvidia-/, 'nvidia ');
}

// A PCI bus id as "0000:5d:00" (domain, bus, device; the function left out, lower case), so the
// forms NVML ("00000000:5D:00.0"), the kernel log ("0000:5d:00") and gpud ("0000:5d:00.0") agree;
// '' when it is not one.
export function busKey(id) {
  if (!id) return '';
  const m = /^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})/i.exec(String(id).trim());
  if (!m) return '';
  return `${(m[1] || '0000').slice(-4)}:${m[2]}:${m[3]}`.toLowerCase();
}
