/* services/coordinator/static/dashboard.js: the dashboard page's logic (plain JS, no build step, no network
 * beyond the coordinator). Every POLL_MS (2 s; ?poll_ms=N overrides, >= 100) it fetches
 * /api/metrics?since=N (appending the new history entries to the plots), /api/status (header, worker table,
 * group counts when the coordinator reports them) and /api/samples. Every step metric is plotted: the named
 * groups below in the "Training" grid, every other metric in a small chart of its own. The x axis is the
 * entry's "step" metric. A changed run_id or a shorter history (coordinator restarted) reloads the page.
 * The "Run health" panels come from /api/panels?since=N (panels.c): throughput lines, the step's time split as bars
 * per step, the dynamic-sampling funnel as three stacked areas (trained, surplus mixed groups, filtered groups; a
 * moving mean over FUNNEL_WINDOW steps), response-length percentiles per step with the latest step's histogram, and
 * the rollout/learner log-prob mismatch. #panel-steps counts the steps they hold. The header's headline is held-out
 * accuracy (the first val-core/<source>/acc/mean@k metric: its latest value and the change since its first, step 0
 * when trainer.val_before_train); "up" is the run's time over every coordinator process (the title has this one's),
 * and the event list (newest first) survives a coordinator restart (events.jsonl). A chart whose values are all
 * equal gets a y range around them (Chart.js would draw 5e-5 on -1..1); tick labels of small values are in
 * scientific notation.
 * Counters for tests: #steps-seen (entries received), #charts-count, #points-plotted (finite points added).
 * All text from the coordinator goes into the DOM through textContent, never as HTML. */
(function () {
  'use strict';

  const params = new URLSearchParams(location.search);
  const POLL_MS = Math.max(100, Number(params.get('poll_ms')) || 2000);
  const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563',
                  '#65a30d', '#ea580c'];

  /* The named groups, in page order; a metric goes to the first group whose test accepts it. */
  const GROUPS = [
    {title: 'Score and accuracy', test: n => n === 'critic/score/mean' || n === 'critic/rewards/mean' ||
                                             /^val-(core|aux)\/.+\/(acc|score|reward)(\/|$)/.test(n)},
    {title: 'Entropy (actor/entropy)', test: n => n === 'actor/entropy'},
    {title: 'Policy clip fractions', test: n => n === 'actor/pg_clipfrac' || n === 'actor/pg_clipfrac_lower'},
    {title: 'Response length (tokens)', test: n => /^response_length\/(mean|max|min|p50|p90|p99)$/.test(n)},
    {title: 'Response clip ratio', test: n => n === 'response_length/clip_ratio'},
    {title: 'Generation batches per step (train/num_gen_batches)', test: n => n === 'train/num_gen_batches'},
    {title: 'Dynamic sampling (batch/*)', test: n => /^batch\/(filtered_ratio|solve_none|solve_all)$/.test(n)},
    {title: 'Throughput (perf/throughput, tokens/s)', test: n => n === 'perf/throughput'},
    {title: 'Timings (timing_s/*, seconds)', test: n => n.startsWith('timing_s/')},
    {title: 'Loss and KL', test: n => n === 'actor/pg_loss' || n === 'actor/ppo_kl' || n === 'actor/kl_loss'},
  ];

  /* The Run health panels: [title, kind, series [[label, path in a /api/panels step entry]]]. */
  const PANELS = [
    ['Throughput (tokens/s)', 'line', [['effective (trained response tokens / step time)', 'throughput.effective'],
                                       ['rollout (generated / generation time)', 'throughput.rollout'],
                                       ['training (trained tokens / update time)', 'throughput.training']]],
    ['Time split of a step (s)', 'stacked', [['generation', 'time_split.generation'],
                                             ['scoring wait', 'time_split.scoring_wait'],
                                             ['old log-prob', 'time_split.old_log_prob'],
                                             ['update', 'time_split.update'],
                                             ['weight sync', 'time_split.weight_sync'],
                                             ['idle', 'time_split.idle']]],
    ['Response length per step (tokens)', 'line', [['p50', 'response_length.p50'], ['p90', 'response_length.p90'],
                                                   ['p99', 'response_length.p99'], ['max', 'response_length.max']]],
    ['Response lengths, latest step', 'hist', []],
    ['Dynamic-sampling funnel (groups, 10-step mean)', 'funnel',
     [['trained', null], ['surplus (mixed, beyond the batch)', null], ['filtered (solved by none or all)', null],
      ['refilled at once (line)', null, {line: true}]]],
    ['Trained groups by staleness (policy versions behind)', 'stacked',
     [0, 1, 2, 3, 4, 5, 6, 7].map(d => [String(d), 'staleness.' + d]).concat([['8+', 'staleness_tail']])],
    ['Rollout vs learner log-probs (rollout_corr/*)', 'line', [['kl', 'logprob_mismatch.kl'],
                                                               ['k3 kl', 'logprob_mismatch.k3_kl'],
                                                               ['|log ppl diff|', 'logprob_mismatch.log_ppl_abs_diff'],
                                                               ['|logprob diff|', 'logprob_mismatch.abs_logprob_diff']]],
  ];
  const FUNNEL_WINDOW = 10;          /* steps in the funnel's moving mean */
  const panelCharts = [];            /* per PANELS entry: its Chart (null without Chart.js) */
  const funnelRaw = [];              /* per step: [trained, surplus, filtered] before the moving mean */
  const headline = {key: null, first: null, firstStep: null, last: null, lastStep: null};
  let panelSince = 0, panelSteps = 0;

  const $ = id => document.getElementById(id);
  const haveChart = typeof window.Chart !== 'undefined';
  const groupCharts = [];            /* per GROUPS entry: its Chart (null without Chart.js) */
  const otherCharts = new Map();     /* metric name -> {chart, card} */
  const routeOf = new Map();         /* metric name -> {chart, dataset} */
  let since = 0, runId = null, pointsPlotted = 0, stepsSeen = 0, chartsCount = 0, lastSamples = '';

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return '–';
    if (typeof v !== 'number') return String(v);
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(digits || 3) : v.toFixed(digits || 3);
  }

  /* A tick label that tells neighbouring ticks apart: as many decimals as the tick spacing needs, scientific notation
   * when the values are under 1e-3 or from 1e6 on (Chart.js's ticks callback: value, index, ticks). */
  function fmtTick(v, i, ticks) {
    const step = ticks && ticks.length > 1 ? Math.abs(ticks[1].value - ticks[0].value) : Math.abs(v) || 1;
    const big = ticks ? Math.max(...ticks.map(t => Math.abs(t.value))) : Math.abs(v);
    if (v === 0) return '0';
    if (big !== 0 && (big < 1e-3 || big >= 1e6)) {
      const digits = Math.min(8, Math.max(1, Math.ceil(Math.log10(big / step) + 1e-9)));
      return v.toExponential(digits);
    }
    return v.toFixed(Math.min(8, Math.max(0, Math.ceil(-Math.log10(step) - 1e-9))));
  }

  function fmtDuration(s) {
    s = Math.floor(s);
    const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60;
    return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + (s % 60) + 's';
  }

  function makeChart(canvas, small) {
    return new Chart(canvas, {
      type: 'line',
      data: {datasets: []},
      options: {
        animation: false, parsing: false, normalized: true, responsive: true, maintainAspectRatio: false,
        spanGaps: true,
        interaction: {mode: 'nearest', axis: 'x', intersect: false},
        elements: {
          point: {radius: ctx => (ctx.dataset && ctx.dataset.data.length > 80 ? 0 : (small ? 1.5 : 2))},
          line: {borderWidth: 1.5, tension: 0},
        },
        scales: {
          x: {type: 'linear', bounds: 'data', title: {display: !small, text: 'step'},
              ticks: {precision: 0, maxTicksLimit: small ? 5 : 10}},
          y: {ticks: {maxTicksLimit: small ? 4 : 6, callback: fmtTick}},
        },
        plugins: {
          legend: {display: !small, labels: {boxWidth: 10, font: {size: 11}}},
          decimation: {enabled: true, algorithm: 'lttb', samples: 400},
          tooltip: {callbacks: {title: items => (items.length ? 'step ' + items[0].parsed.x : '')}},
        },
      },
    });
  }

  function card(title, small) {
    const c = el('div', 'card');
    const h = c.appendChild(el('h3', null, title));
    h.title = title;
    if (small) h.appendChild(el('span', 'latest'));       /* the latest value, next to the name */
    const plot = el('div', 'plot');
    const canvas = el('canvas');
    plot.appendChild(canvas);
    c.appendChild(plot);
    return {card: c, canvas: canvas};
  }

  function addDataset(chart, name) {
    const color = COLORS[chart.data.datasets.length % COLORS.length];
    const ds = {label: name, data: [], borderColor: color, backgroundColor: color};
    chart.data.datasets.push(ds);
    return ds;
  }

  function setupGroups() {
    const grid = $('main-charts');
    for (const g of GROUPS) {
      const k = card(g.title, false);
      grid.appendChild(k.card);
      groupCharts.push(haveChart ? makeChart(k.canvas, false) : null);
      chartsCount++;
    }
  }

  /* The chart and dataset a metric is plotted in (created on first sight). */
  function route(name) {
    let r = routeOf.get(name);
    if (r) return r;
    const gi = GROUPS.findIndex(g => g.test(name));
    if (gi >= 0) {
      const chart = groupCharts[gi];
      r = {chart: chart, dataset: chart ? addDataset(chart, name) : null};
    } else {
      const k = card(name, true);
      const grid = $('other-charts');
      const after = Array.from(otherCharts.keys()).filter(n => n > name).sort()[0];
      grid.insertBefore(k.card, after ? otherCharts.get(after).card : null);
      const chart = haveChart ? makeChart(k.canvas, true) : null;
      otherCharts.set(name, {chart: chart, card: k.card, latest: k.card.querySelector('.latest')});
      chartsCount++;
      r = {chart: chart, dataset: chart ? addDataset(chart, name) : null, latest: otherCharts.get(name).latest};
    }
    routeOf.set(name, r);
    return r;
  }

  /* A y range around the values when they are all equal (Chart.js pads a flat line by +-1: 5e-5 would read as 0). */
  function fitY(chart) {
    let lo = Infinity, hi = -Infinity;
    for (const ds of chart.data.datasets) for (const p of ds.data) { if (p.y < lo) lo = p.y; if (p.y > hi) hi = p.y; }
    const y = chart.options.scales.y;
    if (isFinite(lo) && hi - lo <= 1e-9 * Math.max(Math.abs(lo), Math.abs(hi))) {
      const pad = lo !== 0 ? Math.abs(lo) * 0.1 : 1;
      y.min = lo - pad;
      y.max = hi + pad;
    } else {
      delete y.min;
      delete y.max;
    }
  }

  /* The header's held-out accuracy: the first val-core/<source>/acc/mean@k seen, latest value and change. */
  function trackHeadline(name, x, v) {
    if (!/^val-core\/[^/]+\/acc\/mean@\d+$/.test(name) || typeof v !== 'number' || !isFinite(v)) return;
    if (headline.key === null) headline.key = name;
    if (name !== headline.key) return;
    if (headline.firstStep === null || x < headline.firstStep) { headline.first = v; headline.firstStep = x; }
    if (headline.lastStep === null || x >= headline.lastStep) { headline.last = v; headline.lastStep = x; }
    const d = (headline.last - headline.first) * 100;
    $('headline-acc').textContent = (headline.last * 100).toFixed(1) + '%';
    $('headline-delta').textContent = '(' + (d >= 0 ? '+' : '') + d.toFixed(1) + ' since step ' + headline.firstStep +
                                      ', at step ' + headline.lastStep + ')';
    $('headline').title = headline.key + ': held-out accuracy';
  }

  function addEntries(entries, base) {
    const touched = new Set();
    entries.forEach((e, i) => {
      const x = typeof e.step === 'number' ? e.step : base + i;     /* the history index when no step */
      for (const name of Object.keys(e)) {
        if (name === 'step') continue;
        trackHeadline(name, x, e[name]);
        const r = route(name);
        const v = e[name];
        if (r.latest) r.latest.textContent = ' = ' + (typeof v === 'number' ? fmt(v, 4) : 'NaN/Inf');
        if (typeof v !== 'number' || !isFinite(v)) continue;      /* null: non-finite at the source */
        if (r.dataset) { r.dataset.data.push({x: x, y: v}); touched.add(r.chart); }
        pointsPlotted++;
      }
      stepsSeen++;
      $('last-step').textContent = String(x);
    });
    for (const c of touched) { fitY(c); c.update('none'); }
    $('steps-seen').textContent = String(stepsSeen);
    $('points-plotted').textContent = String(pointsPlotted);
    $('charts-count').textContent = String(chartsCount);
  }

  function pathGet(o, path) {
    for (const k of path.split('.')) o = o === null || o === undefined ? undefined : o[k];
    return typeof o === 'number' && isFinite(o) ? o : null;
  }

  function makePanel(canvas, kind, series) {
    const bars = kind === 'stacked' || kind === 'hist', area = kind === 'funnel', stack = bars || area;
    const chart = new Chart(canvas, {
      type: bars ? 'bar' : 'line',
      data: {labels: [], datasets: series.map((s, i) => {
        const line = s[2] && s[2].line;          /* drawn over the stacked areas, not stacked on them */
        return {label: s[0], data: [], borderColor: COLORS[i % COLORS.length],
                backgroundColor: area && !line ? COLORS[i % COLORS.length] + '99' : COLORS[i % COLORS.length],
                fill: area && !line ? (i === 0 ? 'origin' : '-1') : false, stack: line ? 'line' : 'areas',
                borderDash: line ? [5, 3] : undefined, borderWidth: line ? 2 : undefined};
      })},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, spanGaps: true,
        interaction: {mode: 'index', intersect: false},
        elements: {point: {radius: area ? 0 : 2}, line: {borderWidth: area ? 1 : 1.5, tension: 0}},
        scales: {x: {stacked: kind === 'stacked', title: {display: true, text: kind === 'hist' ? 'tokens' : 'step'}},
                 y: {stacked: stack && kind !== 'hist', beginAtZero: stack,
                     ticks: {maxTicksLimit: 6, callback: fmtTick}}},
        plugins: {legend: {display: kind !== 'hist', labels: {boxWidth: 10, font: {size: 11}}}},
      },
    });
    if (kind === 'hist') chart.data.datasets.push({label: 'responses', data: [], backgroundColor: COLORS[0]});
    return chart;
  }

  function setupPanels() {
    const grid = $('panel-charts');
    for (const [title, kind, series] of PANELS) {
      const k = card(title, false);
      grid.appendChild(k.card);
      panelCharts.push(haveChart ? makePanel(k.canvas, kind, series) : null);
      chartsCount++;
    }
  }

  /* The funnel's series at a step: trained, surplus (kept - trained), filtered, and refilled (prompts drawn at once
   * into filtered groups' slots, a line); each a moving mean over the last FUNNEL_WINDOW steps (a missing value
   * counts as 0). */
  function funnelPoint(st) {
    const f = st.funnel || {}, n = v => (typeof v === 'number' && isFinite(v) ? v : 0);
    funnelRaw.push([n(f.trained), Math.max(0, n(f.kept) - n(f.trained)), n(f.dropped), n(f.refilled)]);
    const w = funnelRaw.slice(-FUNNEL_WINDOW);
    return [0, 1, 2, 3].map(k => w.reduce((a, r) => a + r[k], 0) / w.length);
  }

  function addPanelSteps(steps) {
    let latestHist = null;
    for (const st of steps) {
      PANELS.forEach(([, kind, series], i) => {
        const ch = panelCharts[i];
        if (!ch || kind === 'hist') return;
        ch.data.labels.push(st.step);
        if (kind === 'funnel') funnelPoint(st).forEach((v, k) => ch.data.datasets[k].data.push(v));
        else if (series.some(s => s[1] === 'staleness_tail')) {
          const h = Array.isArray(st.staleness) ? st.staleness : [];
          series.forEach((s, k) => ch.data.datasets[k].data.push(
            k < 8 ? (h.length > k ? h[k] : null) : (h.length > 8 ? h.slice(8).reduce((a, x) => a + x, 0) : null)));
        }
        else series.forEach((s, k) => ch.data.datasets[k].data.push(pathGet(st, s[1])));
      });
      if (st.response_length && st.response_length.hist) latestHist = {step: st.step, h: st.response_length.hist};
      panelSteps++;
    }
    const hi = PANELS.findIndex(p => p[1] === 'hist'), hc = panelCharts[hi];
    if (hc && latestHist) {
      const n = latestHist.h.counts.length, w = latestHist.h.max_len / n;
      hc.data.labels = latestHist.h.counts.map((_, b) => Math.round(b * w) + '–' + Math.round((b + 1) * w));
      hc.data.datasets[0].data = latestHist.h.counts.slice();
      hc.data.datasets[0].label = 'responses at step ' + latestHist.step;
      hc.options.plugins.legend.display = true;
    }
    if (steps.length) for (const c of panelCharts) if (c) c.update('none');
    $('panel-steps').textContent = String(panelSteps);
  }

  async function pollPanels() {
    for (let pages = 0; pages < 100; pages++) {
      const r = await getJSON('/api/panels?since=' + panelSince);
      addPanelSteps(r.steps);
      panelSince = r.next;
      if (r.next >= r.total) return;
    }
  }

  async function getJSON(url) {
    const r = await fetch(url, {cache: 'no-store'});
    if (!r.ok) throw new Error(url + ': HTTP ' + r.status);
    return r.json();
  }

  async function pollMetrics() {
    for (let pages = 0; pages < 100; pages++) {
      const r = await getJSON('/api/metrics?since=' + since);
      if ((runId !== null && r.run_id !== runId) || r.total < since) { location.reload(); return; }
      runId = r.run_id;
      addEntries(r.entries, r.since);
      since = r.next;
      if (r.next >= r.total || r.entries.length === 0) return;
    }
  }

  function renderWorkers(st) {
    const tbody = $('workers').tBodies[0];
    const rows = [];
    const workers = st.workers.slice().sort((a, b) => a.role.localeCompare(b.role) || a.id.localeCompare(b.id));
    for (const w of workers) {
      const tr = el('tr');
      const probe = w.probe && w.probe.failed ? ' — weight probe failed (diff ' + fmt(w.probe.max_abs_diff, 6) +
                    ', version ' + w.probe.version + '): no groups' : '';
      const cells = [w.role, w.id, w.address, w.state + probe, w.policy_version, fmt(w.last_heartbeat_s, 1) + ' s ago',
                     fmt(w.load, 2), w.busy + ' / ' + w.capacity, w.credit, w.rank, w.restarts ?? 0, w.key || '–', w.build];
      cells.forEach((v, i) => {
        const td = el('td', i === 3 ? 'state-' + w.state : null, v === undefined ? '' : v);
        tr.appendChild(td);
      });
      rows.push(tr);
    }
    if (!rows.length) {
      const tr = el('tr');
      const td = el('td', 'muted', 'no worker has registered yet');
      td.colSpan = 11;
      tr.appendChild(td);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    const a = st.alive || {};
    $('alive-summary').textContent = Object.keys(a).map(k => a[k] + ' ' + k).join(', ') + ' alive';
    const gc = $('group-counts');
    const groups = st.group_counts || st.groups;
    if (groups && typeof groups === 'object') {
      gc.hidden = false;
      gc.replaceChildren(...Object.keys(groups).map(k => {
        const s = el('span', null, k + ': ');
        s.appendChild(el('b', null, groups[k]));
        return s;
      }));
    }
  }

  function renderStatus(st) {
    $('run-id').textContent = st.run_id;
    $('step').textContent = st.step === null ? 'resuming' : String(st.step);   /* null: not restored yet */
    $('policy-version').textContent = st.policy_version === null ? 'resuming' : String(st.policy_version);
    $('uptime').textContent = fmtDuration(st.uptime_s);
    $('uptime-box').title = 'the run, over every coordinator process; this coordinator process: ' +
                            fmtDuration(st.coordinator_uptime_s || 0);
    $('heap').textContent = (st.heap_bytes / 1048576).toFixed(1) + ' MiB';
    const rec = st.recovery || {};                  /* issue 17: what healed itself so far */
    $('recovery').textContent = (rec.rollbacks ?? 0) + ' rollbacks, coordinator restarted ' +
                                (rec.coordinator_restarts ?? 0) + '×';
    $('phase').textContent = (st.phase || '–') + (st.epoch !== undefined ? ', epoch ' + st.epoch : '');
    $('paused-badge').hidden = !st.paused;
    $('insecure-badge').hidden = !(st.security && st.security.insecure);
    $('status-line').textContent = st.status_line || (st.paused ? 'paused' : 'idle');
    const off = st.controls_enabled === false;      /* no cluster.token_file: the buttons could only get a 403 */
    for (const b of document.querySelectorAll('#control button')) b.disabled = off;
    $('control-off').hidden = !off;
    const ev = $('events');                          /* worker losses, rejoins, rollbacks (newest first) */
    ev.replaceChildren(...(st.events || []).slice(0, 5).map(x => {
      const li = document.createElement('li');
      li.textContent = new Date(x.t * 1000).toLocaleTimeString() + '  step ' + (x.step ?? '–') + '  ' + x.text;
      return li;
    }));
    renderWorkers(st);
  }

  function renderSamples(data) {
    const key = JSON.stringify(data.samples);
    if (key === lastSamples) return;
    lastSamples = key;
    const box = $('samples');
    if (!data.samples.length) { box.replaceChildren(el('p', 'muted', 'no samples yet')); return; }
    box.replaceChildren(...data.samples.map(s => {
      const d = el('div', 'sample ' + (s.acc ? 'ok' : 'wrong'));
      const meta = el('div', 'meta');
      const facts = [['step', s.step], ['source', s.data_source], ['score', fmt(s.score, 3)], ['acc', s.acc],
                     ['pred', s.pred], ['truth', s.ground_truth], ['tokens', s.response_tokens],
                     ['finish', s.finish_reason]];
      for (const [k, v] of facts) {
        const sp = el('span', null, k + ' ');
        sp.appendChild(el('b', null, v === undefined || v === null ? '–' : v));
        meta.appendChild(sp);
      }
      d.appendChild(meta);
      const det = el('details');
      det.appendChild(el('summary', null, 'prompt' + (s.prompt_truncated ? ' (truncated)' : '')));
      det.appendChild(el('pre', null, s.prompt));
      d.appendChild(det);
      d.appendChild(el('pre', 'response', s.response + (s.response_truncated ? '\n[… truncated]' : '')));
      return d;
    }));
  }

  async function tick() {
    try {
      const [st, samples] = await Promise.all([getJSON('/api/status'), getJSON('/api/samples'), pollMetrics(),
                                               pollPanels()]);
      renderStatus(st);
      renderSamples(samples);
      $('conn-badge').hidden = true;
    } catch (e) {
      $('conn-badge').hidden = false;
      $('status-line').textContent = 'cannot reach the coordinator: ' + e.message;
    }
    setTimeout(tick, POLL_MS);
  }

  async function loadConfig() {
    try {
      const r = await fetch('/api/config', {cache: 'no-store'});
      $('config').textContent = r.ok ? await r.text() : 'HTTP ' + r.status;
    } catch (e) {
      $('config').textContent = 'cannot load: ' + e.message;
    }
  }

  function setupControl() {
    const tok = $('token');
    tok.value = sessionStorage.getItem('dapo-token') || '';
    for (const b of document.querySelectorAll('#control button')) {
      b.addEventListener('click', async () => {
        const action = b.dataset.action;
        if (action === 'stop' && !confirm('Stop the run (checkpoint, tell every worker, exit)?')) return;
        sessionStorage.setItem('dapo-token', tok.value);
        const out = $('control-result');
        try {
          const r = await fetch('/api/control/' + action, {method: 'POST', headers: {Authorization: 'Bearer ' + tok.value}});
          out.textContent = action + ': HTTP ' + r.status + ' ' + (await r.text());
        } catch (e) {
          out.textContent = action + ': ' + e.message;
        }
      });
    }
  }

  if (!haveChart) {
    const e = $('chart-error');
    e.hidden = false;
    e.textContent = 'Chart.js did not load (GET /js/chart.min.js failed): install Debian\'s libjs-chart.js on the ' +
                    'coordinator host. Tables and counters still update.';
  }
  setupPanels();
  setupGroups();
  $('charts-count').textContent = String(chartsCount);
  setupControl();
  loadConfig();
  tick();
})();
