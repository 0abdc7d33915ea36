/* The live session dashboard (lab/admin_views.py): draws the page's own data and polls
   /LabDashboardData/<code> every few seconds. Text goes in with textContent only: codes,
   labels and reasons are data, never markup. Plots: uPlot (vendored, _static/vendor/uplot). */
(function () {
  "use strict";
  var root = document.getElementById("lab-dashboard");
  var plots = {};

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function fillTable(table, headers, rows) {
    table.textContent = "";
    var head = el("tr");
    headers.forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(head);
    rows.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c) {
        var td = el("td");
        if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "" : String(c);
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
  }

  function pct(x) { return x === null || x === undefined ? "–" : Math.round(x * 100) + " %"; }
  function num(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }

  function replayLink(code, participant) {
    var a = el("a", participant);
    a.href = "/LabReplay/" + encodeURIComponent(code) + "?participant=" + encodeURIComponent(participant);
    return a;
  }

  function drawPlot(key, title, rounds, series, yMax, caption) {
    var container = document.getElementById("plot-" + key);
    if (!container) {
      container = el("div", null, "lab-plot");
      container.id = "plot-" + key;
      document.getElementById("dash-plots").appendChild(container);
    }
    var data = [rounds].concat(series.map(function (s) { return s.values; }));
    if (plots[key]) { plots[key].setData(data); setCaption(container, caption); return; }
    var available = container.parentNode.clientWidth;
    var width = available >= 900 ? Math.floor(available / 2) - 8 : Math.max(300, available - 8);
    plots[key] = new uPlot({
      title: title, width: width, height: 190,
      scales: { x: { time: false }, y: { range: yMax ? [0, yMax] : function (u, min, max) { return [0, Math.max(1, max)]; } } },
      axes: [{ label: "round", incrs: [1, 2, 5], values: function (u, vals) { return vals.map(function (v) { return String(v); }); } }, {}],
      series: [{ label: "round" }].concat(series.map(function (s) {
        return { label: s.label, stroke: s.color, width: 2, points: { size: 6 }, spanGaps: false };
      }))
    }, data, container);
    setCaption(container, caption, width);
  }

  function setCaption(container, caption, width) {
    if (!caption) return;
    var note = container.querySelector(".lab-caption");
    if (!note) {
      note = container.appendChild(el("div", null, "lab-caption small text-muted"));
      note.style.maxWidth = width + "px";
    }
    note.textContent = caption;
  }

  function render(d) {
    var status = document.getElementById("dash-status");
    status.textContent = d.treatment + " · label-" + d.label_setting + " · " + d.game_order + " · " +
      d.rounds_per_game + " rounds · updated " + new Date(d.generated_at * 1000).toLocaleTimeString();

    var hold = document.getElementById("dash-hold");
    hold.textContent = "";
    var h = d.progress.round_start_hold;
    if (h) {
      hold.appendChild(el("div", "Round start " + h.app + " r" + h.round + ": " + h.waiting + " waiting for " +
        Math.round(h.held_seconds) + " s, held by " + h.held_by_count + " participant(s): " + h.held_by.join(", "),
        "alert alert-info py-1"));
    }
    fillTable(document.getElementById("dash-stages"), ["where", "participants"],
      d.progress.stages.map(function (s) { return [s.stage, s.participants]; }));

    var alerts = document.getElementById("dash-alerts");
    alerts.textContent = "";
    if (d.progress.idle.length) alerts.appendChild(el("div", "Idle (over " + d.progress.idle_after_seconds +
      " s on a page): " + d.progress.idle.join(", "), "alert alert-warning py-1"));
    if (d.progress.closed_tabs.length) alerts.appendChild(el("div", "Closed tab (oTree's wait-page connection): " +
      d.progress.closed_tabs.join(", "), "alert alert-danger py-1"));

    fillTable(document.getElementById("dash-waits"), ["app", "round", "spread (s)", "slowest"],
      d.round_start_waits.slice(-10).map(function (w) { return [w.app, w.round, w.spread_seconds, w.slowest]; }));

    Object.keys(d.games).forEach(function (game) {
      var g = d.games[game];
      var coop = [{ label: "humans", color: "#1f77b4", values: g.human_cooperation }];
      if (g.agent_cooperation) coop.push({ label: "agents", color: "#d62728", values: g.agent_cooperation });
      drawPlot(game + "-coop", game + ": cooperation rate (A) per round", g.rounds, coop, 1);
      if (g.unsent_messages) {
        drawPlot(game + "-agree", game + ": agreement & breach rate (proxy)", g.rounds, [
          { label: "agreement", color: "#2ca02c", values: g.agreement_rate },
          { label: "breach | agreement", color: "#ff7f0e", values: g.breach_rate }], 1,
          g.agreements_total + " agreements and " + g.breaches_total + " breaches in " + g.pairs_total +
          " pair-rounds so far. Agreement: both sides proposed A in a message sent in time; breach: " +
          "an agreement then a B (not the annotated measure of SI Note 2).");
      }
      var late = [{ label: "decisions timed out", color: "#9467bd", values: g.timed_out }];
      if (g.unsent_messages) late.unshift({ label: "messages not sent in time", color: "#8c564b", values: g.unsent_messages });
      drawPlot(game + "-late", game + ": late messages and decisions per round", g.rounds, late, null);
    });

    var agentsBlock = document.getElementById("dash-agents-block");
    if (!d.agents) { agentsBlock.style.display = "none"; } else {
      var a = d.agents;
      var reasons = Object.keys(a.fallbacks_by_reason).map(function (k) { return k + ": " + a.fallbacks_by_reason[k]; }).join(", ") || "none";
      var statuses = Object.keys(a.calls_by_status).map(function (k) { return k + ": " + a.calls_by_status[k]; }).join(", ");
      fillTable(document.getElementById("dash-agents"), ["", ""], [
        ["model", a.model],
        ["calls", a.calls + (statuses ? " (" + statuses + ")" : "")],
        ["latency p50 / p95", num(a.latency_p50, 2) + " s / " + num(a.latency_p95, 2) + " s"],
        ["fallbacks by reason", reasons],
        ["spent / budget", num(a.spent, 4) + " / " + (a.budget === null ? "no limit" : num(a.budget, 2)) + " USD"],
        ["model check", a.model_check]]);
    }

    // Those who need attention first: idle, closed tab, then the rest in session order.
    var rank = function (p) { return p.idle ? 0 : p.tab === "closed" ? 1 : 2; };
    var participants = d.progress.participants.slice().sort(function (a, b) { return rank(a) - rank(b) || a.id - b.id; });
    fillTable(document.getElementById("dash-participants"), ["#", "code (replay)", "label", "app", "round", "page",
      "on page (s)", "tab", "state"], participants.map(function (p) {
        var state = p.finished ? "finished" : p.idle ? "IDLE" : p.on_wait_page ? "waiting" : "";
        return [p.id, replayLink(d.session_code, p.code), p.label, p.app, p.round, p.page, p.seconds_on_page, p.tab, state];
      }));
  }

  function refresh() {
    fetch(root.dataset.url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(render)
      .catch(function (e) { document.getElementById("dash-status").textContent = "update failed (" + e.message + "), retrying"; });
  }

  render(JSON.parse(document.getElementById("dashboard-data").textContent));
  setInterval(refresh, Number(root.dataset.refreshMs) || 3000);
})();
