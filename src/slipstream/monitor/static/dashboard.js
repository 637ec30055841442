// slipstream dashboard: polls /api/status and /api/results, draws small canvas line charts.
// No dependencies, works offline. Test hooks live on window.__slipstream.
"use strict";

(() => {
  const params = new URLSearchParams(window.location.search);
  const POLL_MS = Math.min(Math.max(Number(params.get("poll")) || 1500, 200), 10000);

  const COLORS = {
    input: "#2f6fde",
    processed: "#1f8a4c",
    duration: "#805ad5",
    lag: "#dd6b20",
    state: "#319795",
    grid: "#e3e6ec",
    axis: "#6b7385",
  };

  const HEALTH_LABEL = {
    starting: "starting",
    pending: "no verdict yet",
    healthy: "healthy",
    falling_behind: "falling behind",
    stalled: "stalled",
    failed: "failed",
    stopped: "stopped",
  };

  const app = {
    polls: 0,
    cards: new Map(), // key -> {el, query}
    resultsKey: "",
    resultsVersion: 0,
    lastError: null,
  };

  // ------------------------------------------------------------------ formatting

  // 1250 -> "1.25k", 2500000 -> "2.5M", 0.5 -> "0.5": short labels without float noise.
  function compact(n) {
    if (n === null || n === undefined || !Number.isFinite(n)) return "–";
    const a = Math.abs(n);
    const trim = (x, digits) => String(Number(x.toFixed(digits)));
    for (const [size, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (a >= size) return trim(n / size, a >= 100 * size ? 0 : a >= 10 * size ? 1 : 2) + suffix;
    }
    return trim(n, a >= 100 ? 0 : a >= 10 ? 1 : 2);
  }

  function bytes(n) {
    if (n === null || n === undefined || !Number.isFinite(n)) return "–";
    for (const [size, unit] of [[2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]]) {
      if (n >= size) return `${(n / size).toFixed(1)} ${unit}`;
    }
    return `${n} B`;
  }

  function seconds(s) {
    if (s === null || s === undefined || !Number.isFinite(s)) return "–";
    const a = Math.abs(s);
    if (a < 1) return (s * 1000).toFixed(0) + " ms";
    if (a < 60) return s.toFixed(a < 10 ? 1 : 0) + " s";
    if (a < 3600) return Math.floor(s / 60) + " m " + String(Math.floor(a % 60)).padStart(2, "0") + " s";
    return (s / 3600).toFixed(1) + " h";
  }

  function clock(ms) {
    return new Date(ms).toLocaleTimeString([], { hour12: false });
  }

  // ------------------------------------------------------------------ charts

  // A step of 1, 2 or 5 times a power of ten that splits `span` into about `count` parts.
  function niceStep(span, count) {
    const raw = span / count;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  // lines: [{label, color, values}], t: epoch ms. Draws and returns the number of points drawn.
  function drawChart(canvas, t, lines, emptyText) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 300;
    const h = canvas.clientHeight || 160;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px system-ui, sans-serif";

    const finite = [];
    for (const line of lines) for (const v of line.values) if (Number.isFinite(v)) finite.push(v);
    const points = lines.reduce(
      (n, line) => n + line.values.filter((v, i) => Number.isFinite(v) && Number.isFinite(t[i])).length,
      0,
    );
    const pad = { left: 48, right: 12, top: lines.length > 1 ? 20 : 8, bottom: 20 };
    const plotW = Math.max(w - pad.left - pad.right, 10);
    const plotH = Math.max(h - pad.top - pad.bottom, 10);

    if (points === 0) {
      ctx.fillStyle = COLORS.axis;
      ctx.textAlign = "center";
      ctx.fillText(emptyText || "no data yet", w / 2, h / 2);
      return 0;
    }

    const max = Math.max(...finite);
    const min = Math.min(0, ...finite);
    const step = max > min ? niceStep(max - min, 4) : 1;
    const lo = Math.floor(min / step) * step;
    const hi = Math.max(Math.ceil(max / step) * step, lo + step);
    let t0 = Math.min(...t);
    let t1 = Math.max(...t);
    if (t1 - t0 < 1000) {
      t0 -= 500;
      t1 += 500;
    }
    const x = (ms) => pad.left + ((ms - t0) / (t1 - t0)) * plotW;
    const y = (v) => pad.top + plotH - ((v - lo) / (hi - lo)) * plotH;

    // grid and y labels
    ctx.strokeStyle = COLORS.grid;
    ctx.fillStyle = COLORS.axis;
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let v = lo; v <= hi + step / 2; v += step) {
      const yy = Math.round(y(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(pad.left, yy);
      ctx.lineTo(pad.left + plotW, yy);
      ctx.stroke();
      ctx.fillText(compact(v), pad.left - 6, yy);
    }
    // x labels: first and last time
    ctx.textBaseline = "alphabetic";
    ctx.textAlign = "left";
    ctx.fillText(clock(Math.min(...t)), pad.left, h - 4);
    ctx.textAlign = "right";
    ctx.fillText(clock(Math.max(...t)), pad.left + plotW, h - 4);

    // lines (gaps where a value is missing)
    for (const line of lines) {
      ctx.strokeStyle = line.color;
      ctx.fillStyle = line.color;
      ctx.lineWidth = 2;
      ctx.lineJoin = "round";
      ctx.beginPath();
      let open = false;
      let drawn = 0;
      line.values.forEach((v, i) => {
        if (!Number.isFinite(v) || !Number.isFinite(t[i])) {
          open = false;
          return;
        }
        if (open) ctx.lineTo(x(t[i]), y(v));
        else ctx.moveTo(x(t[i]), y(v));
        open = true;
        drawn++;
      });
      ctx.stroke();
      if (drawn === 1) {
        const i = line.values.findIndex((v) => Number.isFinite(v));
        ctx.beginPath();
        ctx.arc(x(t[i]), y(line.values[i]), 3, 0, 2 * Math.PI);
        ctx.fill();
      }
    }

    // legend
    if (lines.length > 1) {
      ctx.textAlign = "left";
      ctx.textBaseline = "middle";
      let lx = pad.left;
      for (const line of lines) {
        ctx.fillStyle = line.color;
        ctx.fillRect(lx, 6, 10, 3);
        ctx.fillStyle = COLORS.axis;
        ctx.fillText(line.label, lx + 14, 8);
        lx += 14 + ctx.measureText(line.label).width + 16;
      }
    }
    return points;
  }

  function drawCharts(card) {
    const q = card.query;
    const s = q.series || {};
    const t = s.t || [];
    const specs = {
      rates: [
        { label: "input", color: COLORS.input, values: s.input_rps || [] },
        { label: "processed", color: COLORS.processed, values: s.processed_rps || [] },
      ],
      duration: [{ label: "duration", color: COLORS.duration, values: s.batch_duration_s || [] }],
      lag: [{ label: "lag", color: COLORS.lag, values: s.watermark_lag_s || [] }],
      state: [{ label: "state rows", color: COLORS.state, values: s.state_rows || [] }],
    };
    for (const canvas of card.el.querySelectorAll("canvas[data-chart]")) {
      const chart = canvas.dataset.chart;
      const n = drawChart(canvas, t, specs[chart], chart === "lag" ? "no watermark" : "no data yet");
      canvas.dataset.points = String(n);
    }
  }

  // ------------------------------------------------------------------ queries

  function cardFor(key) {
    let card = app.cards.get(key);
    if (!card) {
      const tpl = document.getElementById("query-card");
      const el = tpl.content.firstElementChild.cloneNode(true);
      el.dataset.key = key;
      card = { el, query: null };
      app.cards.set(key, card);
    }
    return card;
  }

  function setFact(el, name, text) {
    el.querySelector(`[data-fact="${name}"]`).textContent = text;
  }

  function renderQuery(card, q) {
    card.query = q;
    const el = card.el;
    el.dataset.health = q.health;
    el.querySelector(".pipeline").textContent = q.pipeline;
    el.querySelector(".name").textContent = q.query;
    const badge = el.querySelector(".badge");
    badge.dataset.health = q.health;
    badge.textContent = HEALTH_LABEL[q.health] || q.health;
    el.querySelector(".reason").textContent = q.reason || "";
    setFact(el, "batch", q.last_batch_id === null ? "–" : String(q.last_batch_id));
    setFact(el, "in", compact(q.input_rows_per_second));
    setFact(el, "out", compact(q.processed_rows_per_second));
    setFact(el, "written", compact(q.written_rows_per_second));
    setFact(el, "lag", seconds(q.watermark_lag_seconds));
    setFact(el, "state", compact(q.state_rows));
    // each stateful operator, from the same report as `slipstream status`
    const ops = el.querySelector("[data-operators]");
    ops.replaceChildren(
      ...(q.state_operators || []).map((op) => {
        const li = document.createElement("li");
        li.textContent = `${op.operator_id}:${op.operator} ${compact(op.rows)} rows, ${bytes(op.memory_bytes)} in memory`;
        return li;
      })
    );
    setFact(el, "rows", compact(q.total_input_rows));
    setFact(el, "quarantined", compact(q.total_quarantined));
    setFact(el, "late", compact(q.total_dropped_by_watermark));
    // a query reading Kafka: records behind latest after its last batch (as `slipstream status`)
    const kafka = q.kafka_lag_records;
    el.querySelector("[data-kafka]").hidden = kafka === null || kafka === undefined;
    setFact(el, "kafka", compact(kafka));
    drawCharts(card);
  }

  function renderStatus(status) {
    const container = document.getElementById("queries");
    const queries = status.queries || [];
    const seen = new Set();
    for (const q of queries) {
      const key = `${q.pipeline}/${q.query}`;
      seen.add(key);
      const card = cardFor(key);
      if (!card.el.isConnected) container.appendChild(card.el);
      renderQuery(card, q);
    }
    for (const [key, card] of app.cards) {
      if (!seen.has(key)) {
        card.el.remove();
        app.cards.delete(key);
      }
    }
    renderWaiting(status);
  }

  // Until a run records its start (once Spark is up: tens of seconds, minutes on a busy
  // machine) the page says how long it has waited instead of showing nothing.
  function renderWaiting(status) {
    const el = document.getElementById("waiting");
    const running = (status.runs || []).some((run) => run.running);
    el.hidden = running;
    if (running) return;
    const waited = (Date.parse(status.generated) - Date.parse(status.since || status.generated)) / 1000;
    const none = (status.queries || []).length === 0;
    el.textContent =
      (none ? "No run has recorded anything here yet" : "No run is running here") +
      ` (waiting ${seconds(waited)}). A run records its start once Spark is up: ` +
      "tens of seconds, minutes on a busy machine; its queries then appear as starting.";
  }

  // ------------------------------------------------------------------ results

  function renderResults(results) {
    const key = JSON.stringify(results);
    if (key === app.resultsKey) return;
    app.resultsKey = key;
    app.resultsVersion += 1;

    const table = document.getElementById("results");
    document.getElementById("results-title").textContent = results.title || "Results";
    document.getElementById("results-updated").textContent = updatedText(results);
    fillTable(table, results);
    table.dataset.version = String(app.resultsVersion);

    // the pipeline's other outputs, one small table each
    const more = document.getElementById("more-results");
    more.replaceChildren(
      ...(results.more || []).map((view) => {
        const section = document.createElement("section");
        section.className = "panel output-panel";
        const head = document.createElement("div");
        head.className = "panel-head";
        const h2 = document.createElement("h2");
        h2.textContent = view.title || "";
        const updated = document.createElement("span");
        updated.className = "muted";
        updated.textContent = updatedText(view);
        head.append(h2, updated);
        const wrap = document.createElement("div");
        wrap.className = "table-wrap";
        const t = document.createElement("table");
        t.createTHead();
        t.createTBody();
        fillTable(t, view);
        wrap.appendChild(t);
        section.append(head, wrap);
        return section;
      })
    );
  }

  function updatedText(view) {
    return view.updated
      ? "updated " + new Date(view.updated).toLocaleTimeString([], { hour12: false })
      : "";
  }

  function fillTable(table, results) {
    const columns = results.columns || [];
    const rows = results.rows || [];
    const numeric = columns.map((_, c) => rows.length > 0 && rows.every((r) => typeof r[c] === "number"));

    const head = document.createElement("tr");
    columns.forEach((name, c) => {
      const th = document.createElement("th");
      th.textContent = name;
      if (numeric[c]) th.className = "num";
      head.appendChild(th);
    });
    table.tHead.replaceChildren(...(columns.length ? [head] : []));

    const body = rows.map((row) => {
      const tr = document.createElement("tr");
      row.forEach((value, c) => {
        const td = document.createElement("td");
        td.textContent = value === null || value === undefined ? "" : String(value);
        if (numeric[c]) td.className = "num";
        tr.appendChild(td);
      });
      return tr;
    });
    if (body.length === 0) {
      const tr = document.createElement("tr");
      const td = document.createElement("td");
      td.className = "muted";
      td.textContent = columns.length ? "no rows yet" : "no results provider";
      tr.appendChild(td);
      body.push(tr);
    }
    table.tBodies[0].replaceChildren(...body);
  }

  // ------------------------------------------------------------------ polling

  function setConnection(ok, text) {
    const el = document.getElementById("connection");
    el.dataset.state = ok ? "up" : "down";
    el.textContent = text;
  }

  async function getJSON(url) {
    const response = await fetch(url, { cache: "no-store" });
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response.json();
  }

  async function poll() {
    try {
      const [status, results] = await Promise.all([getJSON("/api/status"), getJSON("/api/results")]);
      renderStatus(status);
      renderResults(results);
      app.lastError = null;
      setConnection(true, "live · " + new Date(status.generated || Date.now()).toLocaleTimeString([], { hour12: false }));
    } catch (err) {
      app.lastError = String(err);
      setConnection(false, "disconnected: " + app.lastError);
    } finally {
      app.polls += 1;
      window.setTimeout(poll, POLL_MS);
    }
  }

  let resizeTimer = 0;
  window.addEventListener("resize", () => {
    window.clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(() => app.cards.forEach(drawCharts), 100);
  });

  window.__slipstream = {
    polls: () => app.polls,
    pointCount: () =>
      Array.from(document.querySelectorAll("canvas[data-chart]")).reduce(
        (n, c) => n + Number(c.dataset.points || 0),
        0,
      ),
    queries: () => Array.from(app.cards.keys()),
    resultsVersion: () => app.resultsVersion,
    lastError: () => app.lastError,
  };

  poll();
})();
