// The web UI in a real browser: starts `gpud run` on the fake NVML (eight H100s), opens the page in
// Debian's chromium (headless, driven by playwright-core), checks the machine, the eight GPU rows and
// one card per component, injects an Xid 79 through POST /inject-fault and checks that within one
// refresh (no reload) the Xid card turns Unhealthy and the event is in the timeline, that the time
// range (1 h, 24 h, 7 d) changes what the page asks for, and that the Xid card opens its events;
// then loses GPU 3 and checks the LOST row, the stale values, per-GPU health and Xid counts, the
// cards grouped under their root cause, and the drill-down of GPU 3, of GPU 2 (its Xid) and of the
// root-cause card; then hangs the driver (GPU 2's power reading never returns) and checks GPU 2's
// row marked HUNG and every other NOT ANSWERING, none with a live-looking value, the cards "Not
// checked" under the root cause, and the drill-down of GPU 2 and of that card. Saves ui-screenshot.png (desktop, full
// page), ui-screenshot-phone.png, ui-screenshot-gpu-lost.png, ui-screenshot-hung-driver.png and
// the drill-downs ui-drilldown-{gpu,card}-{gpu-lost,hung-driver}.png into $GPUD_UI_OUT_DIR.
//
// Environment (set by CTest): GPUD_BINARY, GPUD_FAKE_NVML, GPUD_SOURCE_DIR, GPUD_WEB_NODE_MODULES,
// GPUD_UI_OUT_DIR; optional GPUD_CHROMIUM (default /usr/bin/chromium), GPUD_TEST_REAL_KMSG=1
// (inject into the real /dev/kmsg where writable), GPUD_UI_TEST_PRIVATE_KMSG=1 (never),
// GPUD_UI_ASSETS_DIR (the page and its assets from this web/build.mjs output folder instead of the
// binary's: a UI change tested against a daemon built from another tree; the API is the daemon's).
// Exit codes: 0 passed, 1 failed, 77 skipped (CTest SKIP_RETURN_CODE).
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const SKIP = 77;
const env = (name) => {
  const v = process.env[name];
  if (!v) fail(`${name} is not set (run this test through ctest)`);
  return v;
};

function log(msg) {
  console.log(`[ui] ${msg}`);
}

let daemon = null;
let daemonLog = '';
let browser = null;
let tmpDir = null;

function cleanup() {
  if (daemon && daemon.exitCode === null && daemon.signalCode === null) daemon.kill('SIGKILL');
  if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true });
  tmpDir = null;
}
// Whatever ends this process, the daemon goes with it.
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'])
  process.on(sig, () => {
    cleanup();
    process.exit(1);
  });

function fail(msg) {
  console.error(`[ui] FAILED: ${msg}`);
  if (daemon && daemonLog) console.error(`[ui] daemon log (tail):\n${daemonLog.slice(-4000)}`);
  process.exit(1);
}

function skip(msg) {
  console.log(`[ui] SKIPPED: ${msg}`);
  process.exit(SKIP);
}

const chromiumPath = process.env.GPUD_CHROMIUM || '/usr/bin/chromium';
const assetsDir = process.env.GPUD_UI_ASSETS_DIR;

// With GPUD_UI_ASSETS_DIR, the context gets GET / and /assets/* from that folder.
async function useAssetsDir(context, origin) {
  if (!assetsDir) return;
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
                  '.css': 'text/css; charset=utf-8' };
  await context.route((url) => url.origin === origin &&
                               (url.pathname === '/' || url.pathname.startsWith('/assets/')),
  (route) => {
    const { pathname } = new URL(route.request().url());
    const file = path.join(assetsDir, pathname === '/' ? 'index.html' : path.normalize(pathname));
    if (!fs.existsSync(file)) return route.fulfill({ status: 404, body: '' });
    return route.fulfill({ status: 200, contentType: types[path.extname(file)] || 'application/octet-stream',
                           body: fs.readFileSync(file) });
  });
}
if (!fs.existsSync(chromiumPath))
  skip(`${chromiumPath} is missing (install Debian's chromium: scripts/install-deps.sh)`);

const gpudBinary = env('GPUD_BINARY');
const fakeNvml = env('GPUD_FAKE_NVML');
const sourceDir = env('GPUD_SOURCE_DIR');
const outDir = env('GPUD_UI_OUT_DIR');
const require = createRequire(path.join(env('GPUD_WEB_NODE_MODULES'), 'noop.js'));
const { chromium } = require('playwright-core');

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// The daemon's TLS certificate is self-signed (created in the temporary data dir).
function api(port, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, method, path: urlPath,
                                rejectUnauthorized: false, timeout: 5000,
                                headers: body ? { 'Content-Type': 'application/json' } : {} },
    (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (data += c));
      res.on('end', () => {
        let json;
        try {
          json = JSON.parse(data);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, body: data, json, headers: res.headers });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath} timed out`)));
    req.on('error', reject);
    if (body) req.write(JSON.stringify(body));
    req.end();
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function kmsgWritable() {
  try {
    fs.closeSync(fs.openSync('/dev/kmsg', 'w'));
    return true;
  } catch {
    return false;
  }
}


async function main() {
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpud-ui-test-'));
  const port = await freePort();
  // The scenario is a copy the test later replaces with a lost GPU (the fake re-reads it).
  const scenario = path.join(tmpDir, 'scenario.json');
  const useScenario = (name) => {
    fs.copyFileSync(path.join(sourceDir, 'testing/fixtures/nvml', name), `${scenario}.tmp`);
    fs.renameSync(`${scenario}.tmp`, scenario);
  };
  useScenario('h100x8-healthy.json');
  const childEnv = { ...process.env, FAKE_NVML_SCENARIO: scenario };
  // /inject-fault writes the real /dev/kmsg only where asked (GPUD_TEST_REAL_KMSG=1, set by
  // .ci/run) and possible (root): a line there stays until reboot and makes every later
  // `gpud scan` on the machine report it. Otherwise the daemon follows, and the endpoint writes, a
  // private file: the same path through the daemon and the UI.
  const realKmsg = process.env.GPUD_TEST_REAL_KMSG === '1' && !process.env.GPUD_UI_TEST_PRIVATE_KMSG;
  if (realKmsg && kmsgWritable()) {
    delete childEnv.GPUD_KMSG_PATH;
    log('injecting into the real /dev/kmsg');
  } else {
    childEnv.GPUD_KMSG_PATH = path.join(tmpDir, 'kmsg');
    fs.writeFileSync(childEnv.GPUD_KMSG_PATH, '');
    log(`${realKmsg ? '/dev/kmsg is not writable here' : 'GPUD_TEST_REAL_KMSG is not 1'}; ` +
        `the daemon follows ${childEnv.GPUD_KMSG_PATH} instead`);
  }
  // The test's POSTs (set-healthy, inject-fault) come over loopback from the daemon's own user, which
  // may mutate; /inject-fault also needs --enable-fault-injection.
  // In the real /dev/kmsg the Xid an earlier run injected on GPU 2 stays until reboot: only Xids
  // of the last 2 minutes count, so GPU 2 starts Healthy and turns Unhealthy on this run's line
  // (runs closer together than that share their lines).
  const lookback = realKmsg ? ['--xid-lookback-period', '2m'] : [];
  daemon = spawn(gpudBinary, ['run', '--listen-address', `127.0.0.1:${port}`,
                              '--data-dir', path.join(tmpDir, 'data'), '--nvml-lib', fakeNvml,
                              '--nvidia-check-interval', '1s', '--metrics-sample-interval', '2s',
                              '--enable-fault-injection', ...lookback],
                 { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  daemon.stdout.on('data', (d) => (daemonLog += d));
  daemon.stderr.on('data', (d) => (daemonLog += d));
  daemon.on('exit', (code, sig) => log(`gpud exited (code ${code}, signal ${sig})`));

  // /healthz, generously: a sanitizer build starts slowly.
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (daemon.exitCode !== null) fail(`gpud exited with ${daemon.exitCode} before serving`);
    try {
      const r = await api(port, 'GET', '/healthz');
      if (r.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) fail('gpud did not answer /healthz within 60 s');
    await sleep(200);
  }
  log(`gpud is serving on https://127.0.0.1:${port}/`);

  // The page and its assets, as a browser would get them.
  const page0 = await api(port, 'GET', '/');
  if (page0.status !== 200 || !page0.headers['content-type'].startsWith('text/html'))
    fail(`GET / answered ${page0.status} ${page0.headers['content-type']}`);

  const names = (await api(port, 'GET', '/v1/states')).json.map((c) => c.component).sort();
  if (names.length < 10) fail(`only ${names.length} components in /v1/states`);

  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    // Playwright gives each launch a fresh temporary --user-data-dir.
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const origin = `https://127.0.0.1:${port}`;
  // First, while nothing else has resized a page: a resize must not trip over empty charts.
  await resizeWithEmptyCharts(origin);

  const context = await browser.newContext({ ignoreHTTPSErrors: true,
                                             viewport: { width: 1440, height: 900 } });
  await useAssetsDir(context, origin);
  if (assetsDir) log(`the page and its assets come from ${assetsDir}, not from the binary`);
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const requested = [];  // the API paths the page asked for, in order
  page.on('request', (r) => {
    const u = r.url();
    if (u.startsWith(origin)) requested.push(u.slice(origin.length));
    if (!u.startsWith(origin) && !u.startsWith('data:')) problems.push(`request off-origin: ${u}`);
    if (r.method() !== 'GET') problems.push(`non-GET request: ${r.method()} ${u}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });

  await page.goto(`${origin}/`, { waitUntil: 'load' });
  await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1,
                             null, { timeout: 30_000 });

  // Machine: host, GPU product and count, driver and CUDA.
  const facts = await page.$$eval('#machine-info .fact', (els) =>
    Object.fromEntries(els.map((e) => [e.dataset.fact, e.querySelector('dd').textContent])));
  log(`machine: ${JSON.stringify(facts)}`);
  if (!/^8 × .*H100/.test(facts.gpus || '')) fail(`GPUs fact is "${facts.gpus}", want 8 × H100`);
  if (facts.driver !== '550.54.15' || facts.cuda !== '12.4')
    fail(`driver/CUDA shown as ${facts.driver}/${facts.cuda}`);
  if (!facts.host || facts.host === '–') fail('no host name shown');

  // Eight GPU rows, each with the live values once the NVIDIA checks ran (1 s interval here).
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('#gpu-table tbody tr')];
    return rows.length === 8 && rows.every((r) => r.cells[1].textContent === 'Healthy' &&
                                                  /^\d+$/.test(r.cells[2].textContent) &&
                                                  /°C/.test(r.cells[4].textContent) &&
                                                  /W$/.test(r.cells[5].textContent) &&
                                                  r.cells[10].textContent === 'on' &&
                                                  r.cells[11].textContent === 'all links up');
  }, null, { timeout: 30_000 }).catch(async () => {
    const rows = await page.$$eval('#gpu-table tbody tr', (rs) => rs.map((r) => r.textContent));
    fail(`want 8 complete GPU rows, have ${rows.length}: ${JSON.stringify(rows)}`);
  });
  const gpuIds = await page.$$eval('#gpu-table tbody tr', (rs) => rs.map((r) => r.cells[0].textContent));
  log(`GPU rows: ${gpuIds.join(', ')}`);
  if (gpuIds.join() !== [0, 1, 2, 3, 4, 5, 6, 7].map((i) => `GPU ${i}`).join())
    fail(`GPU rows out of order: ${gpuIds}`);

  // One card per component, unhealthy ones first.
  const cards = await page.$$eval('#components .card', (els) =>
    els.map((e) => ({ name: e.dataset.component, health: e.dataset.health })));
  const shown = cards.map((c) => c.name).sort();
  if (shown.join() !== names.join())
    fail(`cards ${JSON.stringify(shown)} differ from /v1/states ${JSON.stringify(names)}`);
  const rank = { Unhealthy: 0, Degraded: 1, Initializing: 2, Healthy: 3 };
  for (let i = 1; i < cards.length; i++)
    if (rank[cards[i - 1].health] > rank[cards[i].health])
      fail(`card order: ${cards[i - 1].name} (${cards[i - 1].health}) before ${cards[i].name}`);
  log(`${cards.length} component cards, matching /v1/states`);

  // Charts: one per metric, with samples (history is sampled every 2 s here).
  await page.waitForFunction(() => document.querySelectorAll('#charts .chart canvas').length === 5,
                             null, { timeout: 30_000 }).catch(() => fail('want 5 charts with data'));

  // The Xid card: the host's kernel log may hold Xids from other tests, so start from Healthy.
  const xid = 'accelerator-nvidia-error-xid';
  const card = `#components .card[data-component="${xid}"]`;
  let healthy = false;
  for (let attempt = 0; attempt < 3 && !healthy; attempt++) {
    const r = await api(port, 'POST', `/v1/health-states/set-healthy?components=${xid}`);
    if (r.status !== 200) fail(`set-healthy answered ${r.status}: ${r.body}`);
    healthy = await page.waitForSelector(`${card}[data-health="Healthy"]`, { timeout: 25_000 })
      .then(() => true, () => false);
  }
  if (!healthy) fail('the Xid card did not show Healthy after set-healthy');

  const pci = `${randomInt(0x1000, 0xf000).toString(16)}:${randomInt(0, 0x100).toString(16).padStart(2, '0')}:00.0`;
  await page.evaluate(() => (window.__sameDocument = true));
  const before = Number(await page.evaluate(() => document.body.dataset.refreshes));
  const injected = await api(port, 'POST', '/inject-fault', { xid: { id: 79, pci } });
  if (injected.status !== 200) fail(`/inject-fault answered ${injected.status}: ${injected.body}`);
  const t0 = Date.now();
  log(`injected Xid 79 on ${pci}`);
  await page.waitForFunction(({ card, pci }) => {
    const c = document.querySelector(card);
    const ev = document.querySelector(`#events .event[data-pci="${pci}"]`);
    return c && c.dataset.health === 'Unhealthy' && ev && /XID 79/.test(ev.textContent);
  }, { card, pci }, { timeout: 15_000 }).catch(async () => {
    const state = await page.$eval(card, (c) => `${c.dataset.health}: ${c.textContent}`);
    fail(`within 15 s of the injection: Xid card "${state}", event for ${pci} not in the timeline`);
  });
  const took = Date.now() - t0;
  // The refresh that showed it counts itself once its charts are drawn too.
  await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n, before,
                             { timeout: 15_000 });
  const after = Number(await page.evaluate(() => document.body.dataset.refreshes));
  if (!(await page.evaluate(() => window.__sameDocument === true)))
    fail('the page reloaded instead of refreshing in place');
  log(`Xid card Unhealthy and event in the timeline ${took} ms after the injection ` +
      `(${after - before} refresh(es) of the same document, no reload)`);
  const reason = await page.$eval(`${card} .reason`, (e) => e.textContent);
  const action = await page.$eval(`${card} .action`, (e) => e.textContent).catch(() => '');
  if (!/XID 79/.test(reason) || !/REBOOT_SYSTEM/.test(action))
    fail(`Xid card reason "${reason}", action "${action}"`);
  const first = await page.$eval('#components .card', (e) => e.dataset.health);
  if (first !== 'Unhealthy') fail(`the first card is ${first}, want the unhealthy one first`);

  // The filters: Xid + Fatal keeps our event and nothing of another component or type.
  await page.selectOption('#filter-component', xid);
  await page.selectOption('#filter-type', 'Fatal');
  const filtered = await page.$$eval('#events .event', (els) =>
    els.map((e) => ({ c: e.dataset.component, t: e.dataset.type, pci: e.dataset.pci })));
  if (!filtered.some((e) => e.pci === pci) || filtered.some((e) => e.c !== xid || e.t !== 'Fatal'))
    fail(`filtered timeline: ${JSON.stringify(filtered)}`);
  await page.selectOption('#filter-type', 'Info');
  if ((await page.$$('#events .event')).length !== 0) fail('Info filter still shows Xid events');
  await page.selectOption('#filter-component', '');
  await page.selectOption('#filter-type', '');

  fs.mkdirSync(outDir, { recursive: true });
  const shot = path.join(outDir, 'ui-screenshot.png');
  await page.screenshot({ path: shot, fullPage: true });
  log(`screenshot: ${shot}`);

  // A phone: the same page at 375 px must not scroll sideways (the GPU table scrolls in its box).
  await page.setViewportSize({ width: 375, height: 812 });
  await sleep(300);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  if (overflow > 376) fail(`at 375 px the page is ${overflow} px wide`);
  const phone = path.join(outDir, 'ui-screenshot-phone.png');
  await page.screenshot({ path: phone, fullPage: false });
  log(`phone screenshot: ${phone}`);
  await page.setViewportSize({ width: 1440, height: 900 });

  // set-healthy acknowledges the incident: the card turns Healthy within a refresh and the event
  // stays in the timeline, marked resolved with who acknowledged it.
  const acked = await api(port, 'POST', `/v1/health-states/set-healthy?components=${xid}`);
  if (acked.status !== 200) fail(`set-healthy answered ${acked.status}: ${acked.body}`);
  const resolvedEvent = `#events .event[data-pci="${pci}"][data-resolved="true"]`;
  await page.waitForFunction(({ card, resolvedEvent }) => {
    const c = document.querySelector(card);
    const ev = document.querySelector(resolvedEvent);
    return c && c.dataset.health === 'Healthy' && ev && ev.querySelector('.resolved');
  }, { card, resolvedEvent }, { timeout: 15_000 }).catch(async () => {
    const state = await page.$eval(card, (c) => c.dataset.health);
    const ev = await page.$eval(`#events .event[data-pci="${pci}"]`, (e) => e.outerHTML)
      .catch(() => 'no event');
    fail(`after set-healthy: Xid card "${state}", the event not shown resolved: ${ev}`);
  });
  const label = await page.$eval(`${resolvedEvent} .resolved`, (e) => `${e.textContent} (${e.title})`);
  if (!/^resolved \(acknowledged .+ by .+\)$/.test(label)) fail(`resolved label "${label}"`);
  log(`after set-healthy: Xid card Healthy, the event kept in the timeline as ${label}`);

  await timeRange(page, requested);
  await cardDrillDown(page, xid, pci);

  await lostGpu(page, port, useScenario);
  await hungDriver(page, port, useScenario);

  if (problems.length) fail(`browser problems:\n  ${problems.join('\n  ')}`);

  // The API gone: the page says so instead of silently showing old data.
  daemon.kill('SIGTERM');
  await page.waitForSelector('#error-banner:not([hidden])', { timeout: 25_000 })
    .catch(() => fail('no error banner after the daemon stopped'));
  log(`banner: ${await page.$eval('#error-banner', (e) => e.textContent)}`);

  await browser.close();
  browser = null;
  log('PASSED');
}

// GPU 3 lost while the page is open (the scenario replaced under the running daemon), and an Xid on
// GPU 2: GPU 3 stays in the table as a LOST row whose last values are drawn stale, the other GPUs
// keep their live values, every row shows its per-GPU health and Xid count, and the cards that
// could not check GPU 3 are grouped under the one that reports it. Saves ui-screenshot-gpu-lost.png.
async function lostGpu(page, port, useScenario) {
  const injected = await api(port, 'POST', '/inject-fault', { xid: { id: 79, pci: '0000:3a:00.0' } });
  if (injected.status !== 200) fail(`/inject-fault answered ${injected.status}: ${injected.body}`);
  useScenario('h100x8-gpu-lost.json');
  log('GPU 3 lost (scenario replaced), Xid 79 injected on GPU 2 (0000:3a:00.0)');
  const owner = 'accelerator-nvidia-info';
  const seen = await page.waitForFunction((owner) => {
    const rows = [...document.querySelectorAll('#gpu-table tbody tr')];
    if (rows.length !== 8) return false;
    const lost = rows[3];
    if (lost.dataset.state !== 'lost' || !/LOST/.test(lost.cells[0].textContent) ||
        lost.cells[1].textContent !== 'Unhealthy' || lost.dataset.stale !== 'true' ||
        !/°C/.test(lost.cells[4].textContent))
      return false;
    for (const [i, r] of rows.entries()) {
      if (i === 3) continue;
      if (r.dataset.stale === 'true' || !/°C/.test(r.cells[4].textContent) ||
          !/^\d+$/.test(r.cells[2].textContent))
        return false;
    }
    if (!(Number(rows[2].cells[2].textContent) >= 1) || rows[2].cells[1].textContent !== 'Unhealthy')
      return false;
    const group = document.querySelector(`#components .group[data-root-cause="${owner}"]`);
    if (!group) return false;
    const lead = group.querySelector(`:scope > .card[data-component="${owner}"]`);
    const affected = group.querySelectorAll('.affected .card');
    const outside = [...document.querySelectorAll('#components > .card')]
      .filter((c) => c.dataset.component.startsWith('accelerator-nvidia-') &&
                     !['accelerator-nvidia-error-xid', 'accelerator-nvidia-error-sxid',
                       'accelerator-nvidia-bad-envs', 'accelerator-nvidia-infiniband',
                       'accelerator-nvidia-nccl', 'accelerator-nvidia-peermem',
                       'accelerator-nvidia-gpu-counts'].includes(c.dataset.component));
    // What the lost GPU kept from checking is grey "Partly checked", never a green Healthy badge.
    const green = [...affected].filter((c) => c.dataset.health === 'Healthy' ||
                                              c.querySelector('.badge').textContent === 'Healthy');
    const grey = [...affected].filter((c) => c.dataset.health === 'NotChecked' &&
                                             c.querySelector('.badge').textContent === 'Partly checked');
    return lead && lead.dataset.health === 'Unhealthy' && affected.length >= 10 && !outside.length &&
           !green.length && grey.length >= 1;
  }, owner, { timeout: 30_000 }).then(() => true, () => false);
  if (!seen) {
    const rows = await page.$$eval('#gpu-table tbody tr', (rs) =>
      rs.map((r) => `${r.dataset.state}/${r.dataset.stale}: ${[...r.cells].map((c) => c.textContent).join(' | ')}`));
    const groups = await page.$$eval('#components .group', (gs) =>
      gs.map((g) => `${g.dataset.rootCause}: ${g.querySelectorAll('.card').length} cards`));
    const top = await page.$$eval('#components > .card', (cs) =>
      cs.map((c) => `${c.dataset.component}=${c.dataset.health}`));
    fail(`with GPU 3 lost, within 30 s:\n  rows ${JSON.stringify(rows, null, 1)}\n  groups ` +
         `${JSON.stringify(groups)}\n  ungrouped cards ${JSON.stringify(top)}`);
  }
  const summary = await page.$$eval('#gpu-table tbody tr', (rs) =>
    rs.map((r) => `${r.cells[0].textContent}:${r.cells[1].textContent}:xid ${r.cells[2].textContent}` +
                  (r.dataset.stale === 'true' ? ':stale' : '')));
  const group = await page.$eval('#components .group', (g) =>
    `${g.querySelector('.group-title').textContent} [${[...g.querySelectorAll('.affected .card')]
      .map((c) => c.dataset.component.replace('accelerator-nvidia-', '')).join(', ')}]`);
  log(`GPU rows with GPU 3 lost: ${summary.join(', ')}`);
  log(`grouped: ${group}`);
  const shot = path.join(outDir, 'ui-screenshot-gpu-lost.png');
  await page.screenshot({ path: shot, fullPage: true });
  log(`screenshot: ${shot}`);

  // GPU 3's drill-down: its identity, the info component's finding, what could not check it, its
  // charts only; no event of another GPU (GPU 2's Xid is in GPU 2's panel, not here).
  const gpus = (await api(port, 'GET', '/v1/gpus')).json;
  const g3 = gpus.find((g) => g.index === 3);
  if (!g3) fail(`/v1/gpus has no GPU 3: ${JSON.stringify(gpus)}`);
  await openGpu(page, 3);
  // The info component's gpu_lost event (it names GPU 3's bus id) is among GPU 3's events.
  await page.waitForSelector(`#detail .events .event[data-component="${owner}"][data-name="gpu_lost"]`,
                             { timeout: 20_000 })
    .catch(() => fail('GPU 3\'s panel does not list the gpu_lost event'));
  const panel = await readPanel(page);
  if (panel.gpu !== g3.pci_bus_id || panel.state !== 'lost')
    fail(`GPU 3's panel is for ${panel.gpu} (${panel.state}), want ${g3.pci_bus_id} (lost)`);
  checkIdentity(panel, g3);
  if (!panel.findings.some((f) => f.component === owner && f.health === 'Unhealthy'))
    fail(`GPU 3's panel has no Unhealthy finding of ${owner}: ${JSON.stringify(panel.findings)}`);
  const notChecked = panel.findings.filter((f) => f.health === 'NotChecked' && f.owner === owner);
  if (!notChecked.length || notChecked.flatMap((f) => f.components).length < 10)
    fail(`GPU 3's panel lists too few components kept from it: ${JSON.stringify(notChecked)}`);
  checkChartsOf(panel, 'GPU 3');
  const wrong = panel.events.filter((e) => e.pci && e.pci.toLowerCase().startsWith('0000:3a:00'));
  if (wrong.length) fail(`GPU 3's panel lists GPU 2's events: ${JSON.stringify(wrong)}`);
  log(`GPU 3's drill-down: ${panel.title}; ${panel.findings.length} finding line(s); ` +
      `${panel.events.length} event(s); charts ${JSON.stringify(panel.charts)}`);
  await drillShot(page, 'ui-drilldown-gpu-lost.png');
  await closeWithEscape(page, '#gpu-table tbody tr:nth-child(4) .gpu-open');

  const p2 = await openGpu(page, 2);
  if (!p2.events.some((e) => e.component === 'accelerator-nvidia-error-xid' &&
                             (e.pci || '').toLowerCase().startsWith('0000:3a:00')))
    fail(`GPU 2's panel does not list its Xid 79: ${JSON.stringify(p2.events)}`);
  if (!p2.findings.some((f) => f.component === 'accelerator-nvidia-error-xid' && f.health === 'Unhealthy'))
    fail(`GPU 2's panel has no Xid finding: ${JSON.stringify(p2.findings)}`);
  checkChartsOf(p2, 'GPU 2');
  await closeWithEscape(page, '#gpu-table tbody tr:nth-child(3) .gpu-open');
  log('GPU 2\'s drill-down lists its Xid 79 event and finding');

  // The root-cause card: its finding about GPU 3 and the components it kept from checking.
  const c = await openCard(page, owner);
  if (!c.gpus.some((g) => g.health === 'Unhealthy' && g.gpu === g3.pci_bus_id))
    fail(`${owner}'s panel does not name GPU 3: ${JSON.stringify(c.gpus)}`);
  if (c.kept.length < 10) fail(`${owner}'s panel lists ${c.kept.length} components kept from checking`);
  log(`${owner}'s drill-down: ${c.gpus.length} GPU line(s), ${c.kept.length} component(s) kept ` +
      `from checking, ${c.events.length} event(s)`);
  await drillShot(page, 'ui-drilldown-card-gpu-lost.png');
  await closeWithEscape(page, `#components .card[data-component="${owner}"] .card-open`);
}

// The driver hangs (h100x8-hung-driver.json: GPU 2's power reading sleeps past the call deadline):
// once the call is declared hung, GPU 2's row (the GPU the call was reading) is marked HUNG and
// every other row NOT ANSWERING, none shows a live-looking value (what it shows is its last read,
// drawn stale), the NVIDIA cards are grey "Not checked" under the root cause, and the drill-down of
// GPU 2 and of that card say so. Saves ui-screenshot-hung-driver.png and the two
// drill-downs. The healthy scenario is put back at the end (the stuck call then returns).
async function hungDriver(page, port, useScenario) {
  useScenario('h100x8-hung-driver.json');
  log('driver hung (GPU 2: nvmlDeviceGetPowerUsage sleeps 15 s)');
  const owner = 'accelerator-nvidia-info';
  const seen = await page.waitForFunction((owner) => {
    const rows = [...document.querySelectorAll('#gpu-table tbody tr')];
    if (rows.length !== 8) return false;
    for (const [i, r] of rows.entries()) {
      const want = i === 2 ? ['hung', /HUNG/] : ['not-answering', /NOT ANSWERING/];
      if (r.dataset.state !== want[0] || !want[1].test(r.cells[0].textContent)) return false;
      // A value shown is the last one read, drawn stale: none looks live.
      for (const c of [...r.cells].slice(4))
        if (c.textContent !== '–' && c.dataset.stale !== 'true') return false;
      if (!/°C/.test(r.cells[4].textContent)) return false;
    }
    const group = document.querySelector(`#components .group[data-root-cause="${owner}"]`);
    if (!group) return false;
    const affected = [...group.querySelectorAll('.affected .card')];
    return affected.length >= 10 &&
           affected.every((c) => c.dataset.health !== 'Healthy' &&
                                 c.querySelector('.badge').textContent !== 'Healthy') &&
           affected.some((c) => c.querySelector('.badge').textContent === 'Not checked');
  }, owner, { timeout: 40_000 }).then(() => true, () => false);
  if (!seen) {
    const rows = await page.$$eval('#gpu-table tbody tr', (rs) =>
      rs.map((r) => `${r.dataset.state}: ${[...r.cells].map((c) => c.textContent + (c.dataset.stale ? '(stale)' : '')).join(' | ')}`));
    const groups = await page.$$eval('#components .group', (gs) =>
      gs.map((g) => `${g.dataset.rootCause}: ${[...g.querySelectorAll('.affected .card')].map((c) => `${c.dataset.component}=${c.querySelector('.badge').textContent}`).join(', ')}`));
    const gpus = (await api(port, 'GET', '/v1/gpus')).body;
    fail(`with the driver hung, within 40 s:\n  rows ${JSON.stringify(rows, null, 1)}\n  groups ` +
         `${JSON.stringify(groups)}\n  /v1/gpus ${gpus.slice(0, 3000)}`);
  }
  const summary = await page.$$eval('#gpu-table tbody tr', (rs) =>
    rs.map((r) => `${r.cells[0].textContent}:${r.cells[1].textContent}`));
  log(`GPU rows with the driver hung: ${summary.join(', ')}`);
  const shot = path.join(outDir, 'ui-screenshot-hung-driver.png');
  await page.screenshot({ path: shot, fullPage: true });
  log(`screenshot: ${shot}`);

  await openCard(page, owner);
  // The hang is an event of the owner (once its collection is declared hung), listed on its card.
  await page.waitForSelector(`#detail .events .event[data-component="${owner}"][data-name="nvml_not_answering"]`,
                             { timeout: 30_000 })
    .catch(() => fail(`${owner}'s panel does not list the nvml_not_answering event`));
  const c = await readPanel(page);
  if (c.kept.length < 10) fail(`${owner}'s panel lists ${c.kept.length} components kept from checking`);
  log(`${owner}'s drill-down (hung): ${c.reason}; ${c.kept.length} component(s) kept from ` +
      `checking; ${c.events.length} event(s)`);
  await drillShot(page, 'ui-drilldown-card-hung-driver.png');
  await closeWithEscape(page, `#components .card[data-component="${owner}"] .card-open`);

  const gpus = (await api(port, 'GET', '/v1/gpus')).json;
  const g2 = gpus.find((g) => g.index === 2);
  const panel = await openGpu(page, 2);
  if (panel.gpu !== g2.pci_bus_id || panel.state !== 'hung')
    fail(`GPU 2's panel is for ${panel.gpu} (${panel.state}), want ${g2.pci_bus_id} (hung)`);
  if (!/HUNG/.test(panel.title) || panel.identity.state !== 'hung in nvmlDeviceGetPowerUsage')
    fail(`GPU 2's panel does not say its call hung: ${panel.title}, ${JSON.stringify(panel.identity)}`);
  checkIdentity(panel, g2);
  const notChecked = panel.findings.filter((f) => f.health === 'NotChecked' && f.owner === owner);
  if (notChecked.flatMap((f) => f.components).length < 10)
    fail(`GPU 2's panel lists too few components that could not check it: ${JSON.stringify(panel.findings)}`);
  if (!panel.staleNote) fail('GPU 2\'s panel does not say its table values are the last ones read');
  checkChartsOf(panel, 'GPU 2');
  if (!panel.events.some((e) => e.component === owner && e.name === 'nvml_not_answering'))
    fail(`GPU 2's panel does not list the hang (${owner}'s nvml_not_answering): ${JSON.stringify(panel.events)}`);
  log(`GPU 2's drill-down (hung): ${panel.title}; ${JSON.stringify(panel.findings.map((f) => f.text))}`);
  await drillShot(page, 'ui-drilldown-gpu-hung-driver.png');
  await closeWithEscape(page, '#gpu-table tbody tr:nth-child(3) .gpu-open');

  useScenario('h100x8-healthy.json');
}

// What the open drill-down panel shows, as data.
function readPanel(page) {
  return page.$eval('#detail', (d) => ({
    hidden: d.hidden,
    kind: d.dataset.kind,
    gpu: d.dataset.gpu,
    state: d.dataset.state,
    component: d.dataset.component,
    title: d.querySelector('#detail-title').textContent,
    identity: Object.fromEntries([...d.querySelectorAll('[data-section="identity"] .fact')]
      .map((f) => [f.dataset.fact, f.querySelector('dd').textContent])),
    findings: [...d.querySelectorAll('[data-section="findings"] .finding')].map((f) => ({
      component: f.dataset.component, health: f.dataset.health, owner: f.dataset.owner,
      components: (f.dataset.components || '').split(' ').filter(Boolean), text: f.textContent })),
    staleNote: Boolean(d.querySelector('.stale-note')),
    events: [...d.querySelectorAll('.events .event')].map((e) => ({
      component: e.dataset.component, name: e.dataset.name, pci: e.dataset.pci, text: e.textContent })),
    charts: [...d.querySelectorAll('.chart')].map((c) => ({
      id: c.dataset.chart, series: c.querySelector('.chart-plot').dataset.series || '',
      drawn: c.querySelectorAll('canvas').length > 0 })),
    gpus: [...d.querySelectorAll('[data-section="gpus"] .finding')].map((f) => ({
      gpu: f.dataset.gpu, health: f.dataset.health, text: f.textContent })),
    kept: [...d.querySelectorAll('[data-section="kept from checking"] .finding')]
      .map((f) => f.dataset.component),
    reason: (d.querySelector('.detail-reason') || {}).textContent,
  }));
}

// Clicks GPU `index`'s button in the table; the panel opens with the focus on its close button.
async function openGpu(page, index) {
  await page.click(`#gpu-table tbody tr:nth-child(${index + 1}) .gpu-open`);
  await page.waitForSelector('#detail:not([hidden])[data-kind="gpu"]', { timeout: 5000 })
    .catch(() => fail(`clicking GPU ${index} opened no panel`));
  // Its charts are drawn (canvas) once the panel has its size.
  await page.waitForFunction(() => document.querySelectorAll('#detail .chart canvas').length > 0,
                             null, { timeout: 10_000 }).catch(() => {});
  const panel = await readPanel(page);
  if (!panel.title.startsWith(`GPU ${index}`)) fail(`GPU ${index}'s panel is titled "${panel.title}"`);
  if (!(await page.evaluate(() => document.activeElement.id === 'detail-close')))
    fail('the opened panel does not have the focus');
  return panel;
}

async function openCard(page, component) {
  await page.click(`#components .card[data-component="${component}"] .card-open`);
  await page.waitForSelector(`#detail:not([hidden])[data-component="${component}"]`, { timeout: 5000 })
    .catch(() => fail(`clicking the ${component} card opened no panel`));
  return readPanel(page);
}

// Escape closes the panel and gives the focus back to what opened it.
async function closeWithEscape(page, opener) {
  await page.keyboard.press('Escape');
  await page.waitForSelector('#detail[hidden]', { state: 'attached', timeout: 5000 })
    .catch(() => fail('Escape did not close the panel'));
  const focused = await page.evaluate((sel) => document.activeElement === document.querySelector(sel),
                                      opener);
  if (!focused) fail(`after Escape the focus is not back on ${opener}`);
}

function checkIdentity(panel, g) {
  const id = panel.identity;
  if (id.uuid !== g.uuid || id['bus-id'] !== g.pci_bus_id || !id.serial || id.serial === '–' ||
      !('vbios' in id))
    fail(`identity ${JSON.stringify(id)} does not match /v1/gpus ${g.uuid} ${g.pci_bus_id} ` +
         '(or has no serial / VBIOS line)');
}

// The panel's charts hold that GPU's series only, and at least one has it.
function checkChartsOf(panel, label) {
  if (panel.charts.length !== 3) fail(`the GPU panel has ${panel.charts.length} charts, want 3`);
  const others = panel.charts.filter((c) => c.series && c.series !== label);
  if (others.length) fail(`the ${label} panel charts other series: ${JSON.stringify(others)}`);
  if (!panel.charts.some((c) => c.series === label && c.drawn))
    fail(`the ${label} panel draws none of its series: ${JSON.stringify(panel.charts)}`);
}

// The page with the drill-down open, tall enough that the panel's sections all show.
async function drillShot(page, name) {
  const shot = path.join(outDir, name);
  await page.setViewportSize({ width: 1440, height: 1800 });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await sleep(300);
  await page.screenshot({ path: shot, fullPage: false });
  await page.setViewportSize({ width: 1440, height: 900 });
  log(`drill-down screenshot: ${shot}`);
}

// The time range: 1 h and 7 d ask /v1/events and /v1/metrics for that span at once (no reload),
// label the events and the Xid column so, and 24 h puts it back.
async function timeRange(page, requested) {
  for (const [range, seconds, long, short] of [['1h', 3600, 'hour', '1 h'],
                                               ['7d', 7 * 86400, '7 days', '7 d'],
                                               ['24h', 86400, '24 hours', '24 h']]) {
    const from = requested.length;
    const clicked = Math.floor(Date.now() / 1000);
    await page.click(`#range button[data-range="${range}"]`);
    const asked = async () => {
      const urls = requested.slice(from);
      const ev = urls.map((u) => /^\/v1\/events\?startTime=(\d+)/.exec(u)).filter(Boolean)
        .some((m) => Math.abs(clicked - seconds - Number(m[1])) <= 30);
      const me = urls.some((u) => u.startsWith('/v1/metrics?') && u.includes(`since=${seconds}s`));
      return ev && me;
    };
    const deadline = Date.now() + 15_000;
    while (!(await asked())) {
      if (Date.now() > deadline)
        fail(`after choosing ${range} the page asked ${JSON.stringify(requested.slice(from))}`);
      await sleep(100);
    }
    await page.waitForFunction(({ range, long, short }) =>
      document.body.dataset.range === range &&
      document.querySelector(`#range button[data-range="${range}"]`).getAttribute('aria-pressed') === 'true' &&
      document.querySelector('#events-h .range-long').textContent === long &&
      document.querySelector('#gpu-table thead .range-short').textContent === short,
    { range, long, short }, { timeout: 5000 }).catch(() => fail(`the page does not show the ${range} range`));
  }
  log('time range 1 h / 7 d / 24 h: events and metrics asked for that span, labels follow');
}

// The Xid card opens its events: the injected Xid is listed there, and Escape closes it.
async function cardDrillDown(page, xid, pci) {
  const panel = await openCard(page, xid);
  if (!panel.events.some((e) => e.pci === pci && /XID 79/.test(e.text)))
    fail(`the Xid card's panel does not list the Xid on ${pci}: ${JSON.stringify(panel.events)}`);
  if (panel.events.some((e) => e.component !== xid))
    fail(`the Xid card's panel lists another component's events: ${JSON.stringify(panel.events)}`);
  await closeWithEscape(page, `#components .card[data-component="${xid}"] .card-open`);
  log(`the Xid card opens its ${panel.events.length} event(s), the injected one among them`);
}

// Every chart empty (the metric history answers no samples, as on a fresh daemon), then the page is
// resized to a phone and back: a resize must not touch a chart that has nothing drawn yet.
async function resizeWithEmptyCharts(origin) {
  const context = await browser.newContext({ ignoreHTTPSErrors: true,
                                             viewport: { width: 1440, height: 900 } });
  await useAssetsDir(context, origin);
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  await page.route(/\/v1\/metrics(\?|$)/, (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: '[]' }));
  await page.goto(`${origin}/`, { waitUntil: 'load' });
  await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1,
                             null, { timeout: 30_000 });
  const charts = await page.$$eval('#charts .chart', (els) =>
    els.map((e) => ({ canvas: e.querySelectorAll('canvas').length,
                      empty: !e.querySelector('.empty').hidden })));
  if (charts.length !== 5 || charts.some((c) => c.canvas !== 0 || !c.empty))
    fail(`with no samples want 5 empty charts, have ${JSON.stringify(charts)}`);
  for (const width of [375, 1024, 1440]) {
    await page.setViewportSize({ width, height: 812 });
    // ResizeObserver callbacks run before the next frame is painted.
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  }
  await sleep(300);
  if (problems.length) fail(`resizing with every chart empty:\n  ${problems.join('\n  ')}`);
  log('resized to 375/1024/1440 px with every chart empty: no page error');
  await context.close();
}

main().then(() => {
  cleanup();
  process.exit(0);
}, async (e) => {
  if (browser) await browser.close().catch(() => {});
  fail(e && e.stack ? e.stack : String(e));
});
