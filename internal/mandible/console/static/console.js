// Mantis console: every page's data comes from the HTTP API and the event streams,
// called with the session cookie; state-changing calls carry the session's CSRF token.
"use strict";
(() => {
  // __mantis keeps counters a test reads: events received (in all and by type, with the
  // time of each type's first and last) and when the deployment grid was rendered.
  const M = (window.__mantis = { events: 0, byType: {}, firstAt: {}, lastAt: {}, rendered: false, paintMs: null });
  const page = document.body.dataset.page;
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const UI = "/ui";
  const $ = (id) => document.getElementById(id);

  // el builds an element: attrs are properties or attributes, children text or nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const statusEl = (s) => el("span", { class: "status s-" + s, text: s });
  const when = (t) => (t ? new Date(t).toLocaleString() : "—");
  function announce(msg) { const a = $("announce"); if (a) a.textContent = msg; }

  // call sends one API request and returns {ok, status, body}; a problem answer's body
  // is the problem (detail, fields).
  async function call(method, path, body, type) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRF-Token"] = csrf;
    if (body !== undefined) headers["Content-Type"] = type || "application/json";
    let resp;
    try {
      resp = await fetch(path, { method, headers, credentials: "same-origin",
        body: body === undefined ? undefined : (typeof body === "string" ? body : JSON.stringify(body)) });
    } catch (err) {
      return { ok: false, status: 0, body: { detail: "the server could not be reached: " + err.message } };
    }
    if (resp.status === 401) { location.href = UI + "/signin?next=" + encodeURIComponent(location.pathname + location.search); }
    let data = null;
    const ct = resp.headers.get("Content-Type") || "";
    if (ct.includes("json")) data = await resp.json().catch(() => null);
    return { ok: resp.ok, status: resp.status, body: data || { detail: resp.statusText } };
  }
  const problemText = (r) => (r.body && (r.body.detail || (r.body.error && r.body.error.message))) || "HTTP " + r.status;

  // EVENT_TYPES are the event types the pages listen for (EventSource dispatches a
  // named event only to listeners of its name).
  const EVENT_TYPES = ["deployment.started", "deployment.succeeded", "deployment.failed", "deployment.cancelled",
    "deployment.cancel_requested", "deployment.waiting", "deployment.decided", "deployment.paused", "deployment.resumed",
    "step.started", "step.succeeded", "step.failed", "step.skipped", "step.cancelled",
    "target.queued", "target.running", "target.succeeded", "target.failed", "target.reassigned", "target.analysis",
    "target.output", "reset"];

  // stream follows an event stream, calling onEvent(type, data) for each event; the
  // browser resumes it with Last-Event-ID after a drop.
  function stream(url, onEvent) {
    const live = $("live-state");
    const es = new EventSource(url, { withCredentials: true });
    es.onopen = () => { if (live) live.textContent = "Live: updates appear as they happen."; };
    es.onerror = () => { if (live) live.textContent = "Live updates interrupted; reconnecting…"; };
    for (const t of EVENT_TYPES) {
      es.addEventListener(t, (ev) => {
        M.events++;
        const now = performance.now();
        M.firstAt[t] = M.firstAt[t] || now;
        M.lastAt[t] = now;
        M.byType[t] = (M.byType[t] || 0) + 1;
        let data = {};
        try { data = JSON.parse(ev.data); } catch (_) { /* a malformed event is counted, not shown */ }
        onEvent(t, data);
      });
    }
    return es;
  }

  // debounce runs fn once after a burst of calls.
  function debounce(fn, ms) {
    let timer = null;
    return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
  }

  function fillBody(tbody, rows, cols, empty) {
    tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: cols, text: empty }))]));
  }

  // ---- deployments ----
  async function deploymentsPage() {
    const q = new URLSearchParams(location.search);
    $("f-name").value = q.get("name") || "";
    $("f-status").value = q.get("status") || "";
    const params = new URLSearchParams({ limit: "100" });
    if (q.get("name")) params.set("name", q.get("name"));
    if (q.get("status")) params.set("status", q.get("status"));
    const rowsByID = new Map();
    const load = async () => {
      const r = await call("GET", "/api/v1/deployments?" + params);
      const tbody = document.querySelector("#deployments tbody");
      if (!r.ok) { fillBody(tbody, [], 5, problemText(r)); return; }
      rowsByID.clear();
      const rows = r.body.deployments.map((d) => {
        const cell = el("td", {}, statusEl(d.status));
        rowsByID.set(d.id, cell);
        return el("tr", {}, el("td", {}, el("a", { href: UI + "/deployments/" + d.id, text: d.name })), cell,
          el("td", { text: d.priority }), el("td", { text: when(d.created_at) }), el("td", { text: d.created_by || "—" }));
      });
      fillBody(tbody, rows, 5, "No deployments.");
      $("more").textContent = r.body.next ? "Showing the newest 100." : "";
    };
    const reload = debounce(load, 500);
    await load();
    stream("/sse/events?type=deployment.*", (type, data) => {
      const cell = rowsByID.get(data.deployment_id);
      const what = type.slice("deployment.".length);
      if (!cell) { reload(); return; }
      const status = { started: "running", cancel_requested: "cancelling", waiting: "waiting", paused: "waiting",
        decided: "running", resumed: "running" }[what] || what;
      cell.replaceChildren(statusEl(status));
      if (params.get("status")) reload();
    });
  }

  // ---- new deployment ----
  function newPage() {
    const form = $("new-deployment"), spec = $("spec"), errors = $("spec-errors");
    $("spec-file").addEventListener("change", async (ev) => {
      const f = ev.target.files[0];
      if (!f) return;
      if (f.size > 1 << 20) { showErrors([{ field: "spec file", problem: "larger than 1 MiB" }]); return; }
      spec.value = await f.text();
    });
    function showErrors(list) {
      errors.replaceChildren(...list.map((p) => el("li", { text: (p.field ? p.field + ": " : "") + p.problem })));
      spec.setAttribute("aria-invalid", list.length ? "true" : "false");
      if (list.length) spec.focus();
    }
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (!spec.value.trim()) { showErrors([{ field: "spec", problem: "is empty: paste a spec or choose a file" }]); return; }
      const r = await call("POST", "/api/v1/deployments", spec.value, "application/yaml");
      if (r.ok) { location.href = UI + "/deployments/" + r.body.id; return; }
      const fields = (r.body.fields || []).map((f) => ({ field: f.field, problem: f.problem }));
      showErrors(fields.length ? fields : [{ field: "", problem: problemText(r) }]);
    });
  }

  // ---- one deployment ----
  const DECISIONS = { approval: ["approve", "reject"], on_failure: ["retry", "skip", "abort"], paused: ["resume"] };

  function deploymentPage() {
    const id = document.body.dataset.id;
    const cells = new Map(); // "<step>|<target>" -> td
    const stepHeads = new Map();
    let view = null, rendered = false;
    const outputPane = $("output"), outputSelect = $("output-target");
    let outputBytes = 0;

    // Output is written to the pane once per frame, however many chunks arrived, so a
    // burst of events costs one layout instead of one each.
    let pending = [];
    function appendOutput(target, step, text) {
      const want = outputSelect.value;
      if (want && want !== target) return;
      if (!pending.length) requestAnimationFrame(flushOutput);
      pending.push((want ? "" : "[" + target + " step " + step + "] ") + text);
    }
    function flushOutput() {
      const text = pending.join("");
      pending = [];
      outputPane.append(text);
      outputBytes += text.length;
      if (outputBytes > 400000) { outputPane.textContent = outputPane.textContent.slice(-200000); outputBytes = 200000; }
      outputPane.scrollTop = outputPane.scrollHeight;
    }

    function setCell(step, target, status, detail) {
      let td = cells.get(step + "|" + target);
      if (!td) { renderGrid(); td = cells.get(step + "|" + target); if (!td) return; }
      td.replaceChildren(statusEl(status), detail ? " " + detail : "");
    }

    function targetsOf(d) {
      const names = [];
      const seen = new Set();
      const add = (n) => { if (n && !seen.has(n)) { seen.add(n); names.push(n); } };
      for (const s of d.steps || []) for (const t of s.targets || []) add(t.target);
      let spec = d.spec;
      if (typeof spec === "string") { try { spec = JSON.parse(spec); } catch (_) { spec = null; } }
      for (const t of (spec && Array.isArray(spec.targets) ? spec.targets : [])) add(typeof t === "string" ? t : t && t.name);
      return names;
    }

    function renderGrid() {
      const d = view;
      const steps = d.steps || [];
      const head = el("tr", {}, el("th", { scope: "col", text: "Target" }));
      stepHeads.clear();
      for (const s of steps) {
        const st = el("span", {}, statusEl(s.status));
        stepHeads.set(s.position, st);
        head.append(el("th", { scope: "col" }, s.position + ". " + s.name + " ", st));
      }
      document.querySelector("#grid thead").replaceChildren(head);
      cells.clear();
      // The rows are written as one string: for hundreds of targets one parse is much
      // cheaper than an element at a time.
      const byStep = steps.map((s) => new Map((s.targets || []).map((t) => [t.target, t])));
      const names = targetsOf(d);
      const html = names.map((name) => {
        let row = "<tr><th scope=\"row\">" + esc(name) + "</th>";
        steps.forEach((s, i) => {
          const r = byStep[i].get(name);
          const st = r ? r.status : "—";
          const exit = r && r.exit_code !== undefined && r.exit_code !== null ? " exit " + esc(r.exit_code) : "";
          row += "<td data-cell=\"" + s.position + "\"><span class=\"status s-" + esc(st) + "\">" + esc(st) + "</span>" + exit + "</td>";
        });
        return row + "</tr>";
      });
      const tbody = document.querySelector("#grid tbody");
      tbody.innerHTML = html.join("");
      tbody.querySelectorAll("tr").forEach((tr, i) => {
        for (const td of tr.querySelectorAll("td")) cells.set(td.dataset.cell + "|" + names[i], td);
      });
      if (outputSelect.options.length !== names.length + 1) {
        outputSelect.replaceChildren(el("option", { value: "", text: "every target" }),
          ...names.map((n) => el("option", { value: n, text: n })));
      }
    }

    function renderSummary(ans) {
      const d = ans.deployment;
      const rows = [["Name", d.name], ["Status", statusEl(d.waiting ? "waiting" : d.status)], ["Priority", d.priority],
        ["Created", when(d.created_at) + (d.created_by ? " by " + d.created_by : "")], ["Finished", when(d.finished_at)]];
      if (d.error) rows.push(["Error", d.error]);
      $("summary").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", {}, v)]));
      const links = $("links");
      links.replaceChildren();
      if (ans.links && ans.links.temporal) {
        links.append(el("a", { href: ans.links.temporal, target: "_blank", rel: "noopener" }, "Open its workflow in the Temporal Web UI"));
      }
    }

    function renderActions(d) {
      const waiting = d.waiting || null;
      const box = $("actions");
      box.replaceChildren();
      const names = waiting ? DECISIONS[waiting.kind] || [] : (d.status === "running" ? ["pause"] : []);
      $("waiting").textContent = waiting
        ? "Waiting for a person (" + waiting.kind + ") at step " + waiting.step +
          (waiting.approvers && waiting.approvers.length ? "; approvers: " + waiting.approvers.join(", ") : "") +
          (waiting.since ? " since " + when(waiting.since) : "")
        : (["pending", "running"].includes(d.status) ? "Nothing waits for a decision." : "The deployment has ended.");
      $("comment").closest(".field").hidden = names.length === 0;
      for (const n of names) {
        box.append(el("button", { type: "button", "data-decision": n, onclick: () => decide(n) }, n[0].toUpperCase() + n.slice(1)));
      }
      if (["pending", "running"].includes(d.status)) {
        box.append(el("button", { type: "button", class: "danger", id: "cancel", onclick: cancel }, "Cancel deployment"));
      }
    }

    function renderAnalysis(d) {
      const blocks = [];
      for (const s of d.steps || []) for (const t of s.targets || []) {
        if (t.status !== "failed") continue;
        const a = t.analysis || {};
        blocks.push(el("div", { class: "analysis" },
          el("h3", { text: t.target + " — step " + s.position + " (" + s.name + ")" }),
          el("p", { text: "Exit " + (t.exit_code ?? "none") + (t.error ? ": " + t.error : "") }),
          a.summary ? el("p", {}, el("strong", { text: (a.category || "analysis") + ": " }), a.summary) : el("p", { text: "Analysis: " + (a.status || "pending") }),
          a.suggestion ? el("p", { text: "Suggestion: " + a.suggestion }) : null,
          t.output_tail ? el("pre", { class: "output", tabindex: "0", role: "region", "aria-label": "Output tail of " + t.target + ", step " + s.position, text: t.output_tail }) : null));
      }
      $("analysis").replaceChildren(...(blocks.length ? blocks : [el("p", { text: "No failures." })]));
    }

    async function load() {
      const asked = performance.now();
      const r = await call("GET", "/api/v1/deployments/" + id);
      const answered = performance.now();
      if (!r.ok) { $("summary").replaceChildren(el("dt", { text: "Problem" }), el("dd", { text: problemText(r) })); return; }
      view = r.body.deployment;
      renderSummary(r.body);
      renderActions(view);
      renderGrid();
      renderAnalysis(view);
      if (!rendered) {
        rendered = true;
        M.rendered = true;
        performance.mark("mantis-grid-rendered");
        M.paintMs = performance.now();
        M.fetchStart = asked;
        M.fetchMs = answered - asked;
        M.renderMs = M.paintMs - answered;
        M.cells = cells.size;
      }
    }
    const reload = debounce(load, 300);

    async function decide(decision) {
      const out = $("action-result");
      out.textContent = "Sending " + decision + "…";
      const r = await call("POST", "/api/v1/deployments/" + id + "/decisions", { decision, comment: $("comment").value });
      out.textContent = r.ok ? "Recorded: " + r.body.decision + " by " + r.body.by : decision + " refused: " + problemText(r);
      announce(out.textContent);
      reload();
    }
    async function cancel() {
      const r = await call("POST", "/api/v1/deployments/" + id + "/cancel");
      $("action-result").textContent = r.ok ? "Cancel requested." : "Cancel refused: " + problemText(r);
      reload();
    }

    outputSelect.addEventListener("change", () => loadOutput(outputSelect.value));
    async function loadOutput(target) {
      outputPane.textContent = "";
      outputBytes = 0;
      if (!target || !view) return;
      for (const s of view.steps || []) {
        const r = await call("GET", "/api/v1/deployments/" + id + "/output?target=" + encodeURIComponent(target) + "&step=" + s.position);
        const chunks = r.ok ? r.body.chunks || r.body.output || [] : [];
        for (const c of chunks) appendOutput(target, s.position, decode(c.data));
      }
    }

    function onEvent(type, data) {
      const step = data.step_position ?? data.step;
      if (type === "target.output") { appendOutput(data.target, data.step, decode(data.data)); return; }
      if (type.startsWith("target.") && data.target && step !== undefined && step !== null) {
        const what = type.slice(7);
        if (["queued", "running", "succeeded", "failed"].includes(what)) {
          setCell(step, data.target, what, data.exit_code !== undefined && data.exit_code !== null ? "exit " + data.exit_code : "");
        }
        if (what === "failed" || what === "analysis") reload();
        return;
      }
      if (type.startsWith("step.")) {
        const h = stepHeads.get(data.step_position);
        if (h) h.replaceChildren(statusEl(type.slice(5)));
        if (!h || type === "step.started") reload();
        return;
      }
      reload(); // deployment.* and reset: read the view again
    }

    load().then(() => stream("/sse/deployments/" + id, onEvent));
  }

  // decode turns a base64 chunk (a Go []byte in JSON) into text.
  function decode(b64) {
    if (typeof b64 !== "string") return "";
    try {
      const bin = atob(b64);
      const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
      return new TextDecoder("utf-8", { fatal: false }).decode(bytes);
    } catch (_) { return ""; }
  }

  // ---- targets and instances ----
  // allTargets reads every target, following the list's next links page by page.
  async function allTargets() {
    const targets = [];
    for (let path = "/api/v1/targets?limit=1000"; path;) {
      const r = await call("GET", path);
      if (!r.ok) return r;
      targets.push(...r.body.targets);
      path = r.body.next && r.body.next !== path ? r.body.next : "";
    }
    return { ok: true, body: { targets } };
  }
  async function targetsPage() {
    const [ts, is] = await Promise.all([allTargets(), call("GET", "/api/v1/thorax-instances")]);
    const instances = is.ok ? is.body.instances : [];
    const byID = new Map(instances.map((i) => [i.id, i]));
    const ibody = document.querySelector("#instances tbody");
    if (!is.ok) fillBody(ibody, [], 6, "Instances unavailable: " + problemText(is));
    else {
      fillBody(ibody, instances.map((i) => el("tr", {}, el("td", { text: i.name }),
        el("td", { text: (i.cert_name ? "thorax/" + i.cert_name : "none") + (i.scoped ? " (scoped)" : "") }),
        el("td", {}, el("code", { text: i.id })),
        el("td", {}, statusEl(i.live ? "live" : "dead")), el("td", { "data-heartbeat": i.last_heartbeat_at, text: age(i.last_heartbeat_at) }),
        el("td", { text: String(i.targets || 0) }))), 6, "No Thorax instance has registered.");
    }
    const tbody = document.querySelector("#targets tbody");
    if (!ts.ok) { fillBody(tbody, [], 5, problemText(ts)); return; }
    fillBody(tbody, ts.body.targets.map((t) => {
      const inst = t.assigned_instance_id ? byID.get(t.assigned_instance_id) : null;
      return el("tr", {}, el("td", { text: t.name }), el("td", { text: t.mode }),
        el("td", { text: inst ? inst.name : t.assigned_instance_id || "unassigned" }),
        el("td", {}, inst ? statusEl(inst.live ? "live" : "dead") : "—"),
        el("td", { text: Object.entries(t.labels || {}).map(([k, v]) => k + "=" + v).join(", ") || "—" }));
    }), 5, "No targets registered.");
  }
  function age(t) {
    if (!t) return "never";
    const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
    return s < 120 ? s + " s ago" : Math.round(s / 60) + " min ago";
  }
  function tickAges() {
    for (const td of document.querySelectorAll("[data-heartbeat]")) td.textContent = age(td.dataset.heartbeat);
  }

  // ---- dispatch queue ----
  const PRIORITIES = ["high", "normal", "low"];
  const STATES = ["pending", "processing", "dispatched", "failed", "expired"];
  const SHOWN_WAITING = 100;
  async function queuePage() {
    const r = await call("GET", "/api/v1/dispatch-requests?limit=1000");
    const reqs = r.ok ? r.body.requests : [];
    const count = (s, p) => reqs.filter((q) => q.status === s && (!p || q.priority === p)).length;
    document.querySelector("#counts thead").replaceChildren(el("tr", {}, el("th", { scope: "col", text: "State" }),
      ...PRIORITIES.map((p) => el("th", { scope: "col", text: p })), el("th", { scope: "col", text: "total" })));
    document.querySelector("#counts tbody").replaceChildren(...STATES.map((s) => el("tr", {}, el("th", { scope: "row" }, statusEl(s)),
      ...PRIORITIES.map((p) => el("td", { text: String(count(s, p)) })), el("td", { text: String(count(s)) }))));
    const waiting = reqs.filter((q) => q.status === "pending" || q.status === "processing");
    const tbody = document.querySelector("#requests tbody");
    if (!r.ok) { fillBody(tbody, [], 6, problemText(r)); return; }
    $("requests-shown").textContent = waiting.length > SHOWN_WAITING
      ? "Showing the newest " + SHOWN_WAITING + " of " + waiting.length + " waiting requests." : "";
    fillBody(tbody, waiting.slice(0, SHOWN_WAITING).map((q) => el("tr", {}, el("td", { text: q.target }), el("td", {}, statusEl(q.status)),
      el("td", { text: q.priority }), el("td", { text: q.attempts + " / " + q.max_attempts }),
      el("td", { text: q.held_by || "—" }), el("td", { text: q.reason }))), 6, "Nothing waits: every request was dispatched or ended.");
  }

  // ---- DLQ ----
  async function dlqPage() {
    const result = $("dlq-result");
    const load = async () => {
      const r = await call("GET", "/api/v1/dlq");
      const tbody = document.querySelector("#messages tbody");
      if (!r.ok) { $("dlq-depth").textContent = "The DLQ could not be read: " + problemText(r); fillBody(tbody, [], 4, "—"); return; }
      $("dlq-depth").textContent = r.body.queue + " holds " + r.body.depth + " message(s).";
      fillBody(tbody, (r.body.messages || []).map((m) => el("tr", {}, el("td", { text: m.routing_key }),
        el("td", { text: m.nudge ? JSON.stringify(m.nudge) : m.body.slice(0, 120) }),
        el("td", { text: (m.deaths || []).map((d) => d.reason + "×" + d.count).join(", ") || "—" }),
        el("td", { text: m.problem || "—" }))), 4, "The DLQ is empty.");
    };
    $("requeue").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const r = await call("POST", "/api/v1/dlq/requeue", { to: $("requeue-to").value, limit: Number($("requeue-limit").value) || 0 });
      result.textContent = r.ok ? "Requeued " + r.body.requeued + " message(s) to " + r.body.queue + "." : "Requeue refused: " + problemText(r);
      load();
    });
    const ask = $("purge-ask"), confirmBox = $("purge-confirm");
    ask.addEventListener("click", () => { confirmBox.hidden = false; $("purge-no").focus(); });
    $("purge-no").addEventListener("click", () => { confirmBox.hidden = true; ask.focus(); });
    $("purge-yes").addEventListener("click", async () => {
      const r = await call("POST", "/api/v1/dlq/purge", { confirm: true });
      confirmBox.hidden = true;
      result.textContent = r.ok ? "Purged " + r.body.purged + " message(s)." : "Purge refused: " + problemText(r);
      ask.focus();
      load();
    });
    await load();
  }

  const pages = { deployments: deploymentsPage, new: newPage, deployment: deploymentPage,
    targets: () => { targetsPage(); setInterval(tickAges, 1000); setInterval(targetsPage, 10000); },
    queue: () => { queuePage(); setInterval(queuePage, 5000); }, dlq: dlqPage };
  if (pages[page]) pages[page]();
})();
