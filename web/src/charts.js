// Metric history charts (uPlot) over the samples /v1/metrics returns, merged across refreshes.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { el } from './format.js';

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777',
                 '#65a30d', '#475569', '#ea580c', '#0d9488', '#9333ea', '#b91c1c', '#4d7c0f',
                 '#1d4ed8', '#a16207'];

// What is charted: one series per GPU (label "gpu") for the NVIDIA metrics, one for the host ones.
export const CHARTS = [
  { id: 'gpu-temp', title: 'GPU temperature (°C)', component: 'accelerator-nvidia-temperature',
    metric: 'accelerator_nvidia_temperature_current_celsius', perGpu: true },
  { id: 'gpu-power', title: 'GPU power (W)', component: 'accelerator-nvidia-power',
    metric: 'accelerator_nvidia_power_current_usage_milli_watts', perGpu: true, scale: 1 / 1000 },
  { id: 'gpu-util', title: 'GPU utilization (%)', component: 'accelerator-nvidia-utilization',
    metric: 'accelerator_nvidia_utilization_gpu_util_percent', perGpu: true, range: [0, 100] },
  { id: 'cpu', title: 'CPU usage (%)', label: 'CPU usage', component: 'cpu',
    metric: 'cpu_used_percent', range: [0, 100] },
  { id: 'memory', title: 'Memory used (%)', label: 'Memory used', component: 'memory',
    metric: 'memory_used_percent', range: [0, 100] },
];

export const CHART_COMPONENTS = [...new Set(CHARTS.map((c) => c.component))];
export const GPU_CHARTS = CHARTS.filter((c) => c.perGpu);

// Samples by series, keyed by unix seconds, so overlapping incremental fetches merge cleanly.
export class MetricHistory {
  constructor() {
    this.series = new Map();  // key -> {component, name, labels, points: Map<sec, value>}
  }

  clear() {
    this.series.clear();
  }

  merge(response) {
    for (const comp of response || []) {
      for (const m of comp.metrics || []) {
        const labels = m.labels || {};
        const key = `${comp.component}|${m.name}|${JSON.stringify(labels)}`;
        let s = this.series.get(key);
        if (!s) {
          s = { component: comp.component, name: m.name, labels, points: new Map() };
          this.series.set(key, s);
        }
        s.points.set(m.unix_seconds, m.value);
      }
    }
  }

  // Forgets samples older than minSec (the server's retention deletes them too).
  trim(minSec) {
    for (const s of this.series.values())
      for (const t of s.points.keys()) if (t < minSec) s.points.delete(t);
  }

  latestTime() {
    let latest = 0;
    for (const s of this.series.values())
      for (const t of s.points.keys()) latest = Math.max(latest, t);
    return latest;
  }

  earliestTime() {
    let earliest = Infinity;
    for (const s of this.series.values())
      for (const t of s.points.keys()) earliest = Math.min(earliest, t);
    return earliest;
  }

  select(component, name) {
    return [...this.series.values()].filter((s) => s.component === component && s.name === name);
  }
}

function seriesLabel(spec, s) {
  if (!spec.perGpu) return spec.label;
  return s.labels.gpu !== undefined ? `GPU ${s.labels.gpu}` : (s.labels.uuid || 'GPU');
}

// uPlot's aligned data: [xs, ys1, ys2, ...] over the union of the series' timestamps.
function aligned(spec, list) {
  const times = new Set();
  for (const s of list) for (const t of s.points.keys()) times.add(t);
  const xs = [...times].sort((a, b) => a - b);
  const ys = list.map((s) =>
    xs.map((t) => (s.points.has(t) ? s.points.get(t) * (spec.scale || 1) : null)));
  return [xs, ...ys];
}

// Draws CHARTS (or the given specs) into `container`; `filter` keeps the series it is true for (a
// GPU's panel keeps that GPU's series), `emptyText` is what a chart without samples says.
export class Charts {
  constructor(container, { specs = CHARTS, filter = () => true, emptyText = 'no samples yet' } = {}) {
    this.container = container;
    this.specs = specs;
    this.filter = filter;
    this.emptyText = emptyText;
    this.plots = new Map();  // id -> {plot, keys, box}
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(container);
  }

  width(box) {
    return Math.max(200, box.clientWidth - 2);
  }

  height() {
    return window.innerWidth < 600 ? 170 : 210;
  }

  // A chart with no samples yet has no plot: only drawn charts are resized.
  fit() {
    // A chart without samples has no plot yet; the page may resize before its first sample.
    for (const { plot, box } of this.plots.values())
      if (plot) plot.setSize({ width: this.width(box), height: this.height() });
  }

  // Stops following the container's size and removes the plots (a closed panel's charts).
  destroy() {
    this.resize.disconnect();
    for (const { plot } of this.plots.values()) if (plot) plot.destroy();
    this.plots.clear();
    this.container.replaceChildren();
  }

  update(history) {
    for (const spec of this.specs) {
      const list = history.select(spec.component, spec.metric).filter(this.filter).sort((a, b) =>
        Number(a.labels.gpu ?? 0) - Number(b.labels.gpu ?? 0));
      let entry = this.plots.get(spec.id);
      if (!entry) {
        const box = el('div', { class: 'chart-plot' });
        const empty = el('p', { class: 'empty', text: this.emptyText });
        const wrap = el('figure', { class: 'chart', 'data-chart': spec.id },
                        el('figcaption', { text: spec.title }), box, empty);
        this.container.append(wrap);
        entry = { plot: null, keys: '', box, empty };
        this.plots.set(spec.id, entry);
      }
      entry.empty.hidden = list.length > 0;
      entry.box.dataset.series = list.map((s) => seriesLabel(spec, s)).join(',');
      const keys = entry.box.dataset.series;
      const data = aligned(spec, list);
      if (entry.plot && entry.keys === keys) {
        entry.plot.setData(data);
        continue;
      }
      if (entry.plot) entry.plot.destroy();
      entry.keys = keys;
      entry.plot = null;
      if (list.length === 0) continue;
      const opts = {
        width: this.width(entry.box),
        height: this.height(),
        legend: { live: false },
        cursor: { drag: { x: true, y: false } },
        scales: { x: { time: true }, y: spec.range ? { range: spec.range } : {} },
        axes: [{}, { size: 44 }],
        series: [{}, ...list.map((s, i) => ({
          label: seriesLabel(spec, s),
          stroke: PALETTE[i % PALETTE.length],
          width: 1.5,
          spanGaps: true,
        }))],
      };
      entry.plot = new uPlot(opts, data, entry.box);
    }
  }
}
