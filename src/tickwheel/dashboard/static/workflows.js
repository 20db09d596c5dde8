// tickwheel dashboard: a workflow run's graph, kept current over Server-Sent Events.
// The server reads the run once a second for all open pages and sends a snapshot only when
// something changed; this script paints the newest snapshot at most once per animation frame.
"use strict";

(function () {
  const FINISHED_TASK = ["SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED"];
  let pending = null;
  let scheduled = false;

  function when(iso) {
    return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", "").replace("+00:00", "") : "—";
  }

  function setState(el, prefix, state) {
    // Swap the one state class, keep the others.
    const keep = Array.from(el.classList).filter(function (c) { return c.indexOf(prefix) !== 0; });
    el.setAttribute("class", keep.concat([prefix + state.toLowerCase()]).join(" "));
  }

  function paintNode(node, t) {
    if (node.dataset.state === t.state && (node.getAttribute("href") || null) === hrefOf(t)) return;
    node.dataset.state = t.state;
    setState(node, "st-", t.state);
    node.querySelector(".state").textContent = t.state;
    node.querySelector("title").textContent = t.name + ": " + t.state;
    const href = hrefOf(t);
    if (href) node.setAttribute("href", href); else node.removeAttribute("href");
    node.setAttribute("aria-label", t.name + ": " + t.state + (href ? ", open its execution" : ""));
  }

  function hrefOf(t) {
    return t.executionId ? "/dashboard/executions/" + t.executionId : null;
  }

  function paintRow(row, t) {
    const chip = row.querySelector("[data-col=state]");
    if (chip.textContent !== t.state) {
      chip.textContent = t.state;
      setState(chip, "s-", t.state);
    }
    const exec = row.querySelector("[data-col=execution]");
    if (t.executionId && exec.dataset.id !== t.executionId) {
      const a = document.createElement("a");
      a.className = "mono";
      a.href = hrefOf(t);
      // The tail: ids are UUIDv7, whose first digits are the (shared) time of creation.
      a.textContent = "…" + t.executionId.slice(-12);
      a.setAttribute("aria-label", "Execution " + t.executionId);
      exec.replaceChildren(a);
      exec.dataset.id = t.executionId;
    } else if (!t.executionId && exec.dataset.id) {
      exec.textContent = "—";
      delete exec.dataset.id;
    }
    row.querySelector("[data-col=attempts]").textContent = t.attempts === null ? "—" : String(t.attempts);
    row.querySelector("[data-col=updated]").textContent = when(t.updatedAt);
  }

  function paintRun(snap) {
    const status = document.getElementById("run-status");
    if (status && status.textContent !== snap.run.status) {
      status.textContent = snap.run.status;
      setState(status, "s-", snap.run.status);
    }
    const progress = document.getElementById("run-progress");
    const text = snap.done + " of " + snap.total + " tasks done";
    if (progress && progress.textContent !== text) progress.textContent = text;
    const finished = document.getElementById("run-finished");
    if (finished) finished.textContent = when(snap.run.finishedAt);
    const retries = document.getElementById("run-retries");
    if (retries) retries.textContent = String(snap.run.retryCount);
    const cancel = document.getElementById("cancel-form");
    if (cancel) cancel.hidden = !snap.run.canCancel;
    const retry = document.getElementById("retry-form");
    if (retry) retry.hidden = !snap.run.canRetry;
  }

  function start(graph) {
    const nodes = new Map();
    for (const n of graph.querySelectorAll("a.node[data-task]")) nodes.set(n.dataset.task, n);
    const rows = new Map();
    for (const r of document.querySelectorAll("#run-tasks tr[data-task]")) rows.set(r.dataset.task, r);
    const live = document.getElementById("run-live");

    function paint() {
      scheduled = false;
      const snap = pending;
      pending = null;
      if (!snap) return;
      for (const t of snap.tasks) {
        const node = nodes.get(t.name);
        if (node) paintNode(node, t);
        const row = rows.get(t.name);
        if (row) paintRow(row, t);
      }
      paintRun(snap);
      const running = snap.tasks.some(function (t) { return FINISHED_TASK.indexOf(t.status) < 0; });
      graph.dataset.settled = running ? "no" : "yes";
    }

    const source = new EventSource(graph.dataset.events);
    source.addEventListener("run", function (ev) {
      if (live) live.textContent = "live";
      pending = JSON.parse(ev.data);  // latest wins: a burst between frames is one repaint
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(paint);
      }
    });
    source.addEventListener("open", function () { if (live) live.textContent = "live"; });
    source.onerror = function () {
      // EventSource reconnects by itself (the server ends each stream after a while).
      if (live) live.textContent = "reconnecting…";
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    const graph = document.getElementById("run-graph");
    if (graph && graph.dataset.events) start(graph);
  });
})();
