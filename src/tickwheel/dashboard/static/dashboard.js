// tickwheel dashboard: live counts over Server-Sent Events, small SVG charts, cron preview.
// The server aggregates (one query per tenant per second); this script only paints, and at
// most once per animation frame however fast snapshots arrive.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  let pending = null;
  let painted = false;

  function fmtSeconds(s) {
    if (s === null || s === undefined) return "none waiting";
    if (s < 1) return (s * 1000).toFixed(0) + " ms";
    if (s < 120) return s.toFixed(1) + " s";
    return (s / 60).toFixed(1) + " min";
  }

  function fmtTime(iso) {
    return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "").replace("Z", "") : "—";
  }

  function paint() {
    painted = false;
    const snap = pending;
    pending = null;
    if (!snap) return;
    for (const el of document.querySelectorAll("[data-count]")) {
      const n = snap.counts[el.dataset.count];
      if (n !== undefined && el.textContent !== String(n)) el.textContent = String(n);
    }
    const rate = document.getElementById("finished-rate");
    if (rate && snap.finishedPerSecond !== undefined) rate.textContent = snap.finishedPerSecond + "/s";
    const oldest = document.getElementById("oldest-ready");
    if (oldest) oldest.textContent = fmtSeconds(snap.oldestReadyAgeSeconds);
    if (snap.series) drawSeries(snap.series);
    const alive = document.getElementById("workers-alive");
    if (alive && snap.workersAlive !== undefined) {
      alive.textContent = snap.workersAlive === null ? "–" : String(snap.workersAlive);
    }
  }

  function schedule(snap) {
    // Latest wins: a burst of snapshots between two frames costs one repaint.
    pending = pending && !snap.series && pending.series ? Object.assign(snap, { series: pending.series }) : snap;
    if (!painted) {
      painted = true;
      requestAnimationFrame(paint);
    }
  }

  function line(svg, values, max, cls) {
    const w = 600, h = 160, pad = 4;
    const n = values.length;
    if (n === 0) return;
    const pts = values.map(function (v, i) {
      const x = n === 1 ? w / 2 : (i / (n - 1)) * w;
      const y = h - pad - ((v || 0) / max) * (h - 2 * pad);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    const pl = document.createElementNS(SVG, "polyline");
    pl.setAttribute("points", pts.join(" "));
    pl.setAttribute("class", cls);
    svg.appendChild(pl);
  }

  function axis(svg, max, unit) {
    // The scale goes beside the chart, not inside it: the SVG stretches, text would too.
    const note = document.getElementById(svg.id + "-max");
    if (note) note.textContent = "top of chart: " + (Math.round(max * 100) / 100) + unit;
  }

  function drawSeries(series) {
    const starts = document.getElementById("chart-starts");
    const late = document.getElementById("chart-lateness");
    if (!starts || !late) return;
    const pts = series.points || [];
    starts.replaceChildren();
    late.replaceChildren();
    const s = pts.map(function (p) { return p.startsPerSecond; });
    const maxS = Math.max(0.01, ...s);
    line(starts, s, maxS, "l-starts");
    axis(starts, maxS, "/s");
    const p50 = pts.map(function (p) { return p.latenessP50; });
    const p99 = pts.map(function (p) { return p.latenessP99; });
    const maxL = Math.max(0.01, ...p99.filter(function (v) { return v !== null; }));
    line(late, p99, maxL, "l-p99");
    line(late, p50, maxL, "l-p50");
    axis(late, maxL, " s");
    const sampled = document.getElementById("sampled");
    if (sampled) sampled.hidden = !series.sampled;
  }

  function connect(url) {
    const state = document.getElementById("live-state");
    const source = new EventSource(url);
    source.addEventListener("snapshot", function (ev) {
      if (state) state.textContent = "live";
      schedule(JSON.parse(ev.data));
    });
    source.onerror = function () {
      // EventSource reconnects on its own (the server ends each stream after a while).
      if (state) state.textContent = "reconnecting…";
    };
  }

  function initial(url) {
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (snap) { if (snap) schedule(snap); });
  }

  function cronPreview(form) {
    const out = document.getElementById("preview-out");
    let timer = null;
    function run() {
      const data = new FormData(form);
      const q = new URLSearchParams({ expression: data.get("expression") || "", timezone: data.get("timezone") || "UTC" });
      fetch(form.dataset.preview + "?" + q.toString(), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (body) {
          out.replaceChildren();
          if (body.error) {
            const li = document.createElement("li");
            li.className = "error";
            li.textContent = body.error.message;
            out.appendChild(li);
            return;
          }
          for (const item of body.items) {
            const li = document.createElement("li");
            li.textContent = fmtTime(item.at) + " UTC  (" + item.local + ")" + (item.dst ? "  " + item.dst : "");
            out.appendChild(li);
          }
        })
        .catch(function () { out.textContent = "preview unavailable"; });
    }
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 250);
    });
    // The preview-only form never submits; an edit form posts as usual.
    if (form.getAttribute("action") === "#") {
      form.addEventListener("submit", function (ev) { ev.preventDefault(); run(); });
    }
    run();
  }

  document.addEventListener("DOMContentLoaded", function () {
    const overview = document.getElementById("overview");
    if (overview) initial(overview.dataset.initial);
    const live = document.querySelector("[data-live]");
    if (live) connect(live.dataset.live);
    const preview = document.querySelector("form[data-preview]");
    if (preview) cronPreview(preview);
  });
})();
