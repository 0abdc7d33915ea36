/* The live session dashboard (lab/admin_views.py): draws the page's own data and polls
   /LabDashboardData/<code> every few seconds. Text goes in with textContent only: codes,
   labels and reasons are data, never markup. Plots: uPlot (vendored, _static/vendor/uplot);
   each point carries its value and n, each rate its 95 % Wilson interval. */
(function () {
  "use strict";
  var root = document.getElementById("lab-dashboard");
  var plots = {};
  var lastUpdate = null;

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

  function num(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }
  function clock(epoch) {
    var d = new Date(epoch * 1000);
    return d.toLocaleDateString() + " " + d.toLocaleTimeString();
  }

  function replayLink(code, participant) {
    var a = el("a", participant);
    a.href = "/LabReplay/" + encodeURIComponent(code) + "?participant=" + encodeURIComponent(participant);
    return a;
  }

  // A rate series (successes, trials, rate, low, high) as a plotted line labelled "50% n=2".
  function rateLine(label, color, s) {
    return { label: label, color: color, values: s.rate, low: s.low, high: s.high,
      texts: s.rate.map(function (v, i) { return v === null ? null : Math.round(v * 100) + "% n=" + s.trials[i]; }) };
  }

  // A count series (count, of) as a plotted line labelled "3/12".
  function countLine(label, color, s) {
    return { label: label, color: color, values: s.count,
      texts: s.count.map(function (v, i) { return v === null ? null : v + "/" + s.of[i]; }) };
  }

  // Draws each point's text and, for rates, its interval (a vertical bar), on uPlot's canvas. At
  // each round the highest point's text goes above it, the others' below theirs, so two series
  // with close values do not write over each other.
  function drawPointTexts(u, series) {
    var ctx = u.ctx, ratio = uPlot.pxRatio;
    ctx.save();
    ctx.font = Math.round(10 * ratio) + "px sans-serif";
    ctx.textAlign = "center";
    ctx.lineWidth = ratio;
    u.data[0].forEach(function (round, i) {
      var shown = series.map(function (s, k) { return { s: s, k: k, v: s.values[i] }; }).filter(function (p) {
        return p.v !== null && p.v !== undefined && u.series[p.k + 1].show;
      }).sort(function (a, b) { return b.v - a.v || a.k - b.k; });
      shown.forEach(function (p, rank) {
        var s = p.s, x = u.valToPos(round, "x", true), y = u.valToPos(p.v, "y", true);
        ctx.fillStyle = ctx.strokeStyle = s.color;
        if (s.low && s.low[i] !== null && s.low[i] !== undefined) {
          var top = u.valToPos(s.high[i], "y", true), bottom = u.valToPos(s.low[i], "y", true);
          ctx.beginPath();
          ctx.moveTo(x, top); ctx.lineTo(x, bottom);
          ctx.moveTo(x - 3 * ratio, top); ctx.lineTo(x + 3 * ratio, top);
          ctx.moveTo(x - 3 * ratio, bottom); ctx.lineTo(x + 3 * ratio, bottom);
          ctx.stroke();
        }
        if (s.texts[i]) ctx.fillText(s.texts[i], x, rank === 0 ? y - 6 * ratio : y + (4 + 11 * rank) * ratio);
      });
    });
    ctx.restore();
  }

  function drawPlot(key, title, rounds, series, yMax, caption) {
    var container = document.getElementById("plot-" + key);
    if (!container) {
      container = el("div", null, "lab-plot");
      container.id = "plot-" + key;
      document.getElementById("dash-plots").appendChild(container);
    }
    var data = [rounds].concat(series.map(function (s) { return s.values; }));
    var signature = series.map(function (s) { return s.label; }).join("|");
    var plot = plots[key];
    if (plot && plot.signature !== signature) { plot.uplot.destroy(); plot = plots[key] = null; }
    if (plot) {
      plot.series = series;  // read by the draw hook
      plot.uplot.setData(data);
      setCaption(container, caption);
      return;
    }
    plot = plots[key] = { series: series, signature: signature };
    // One plot a row: ten rounds' "50% n=72" need the column's width to stand apart.
    var width = Math.max(300, container.parentNode.clientWidth - 8);
    plot.uplot = new uPlot({
      title: title, width: width, height: 240,
      scales: { x: { time: false, range: [0.5, rounds.length + 0.5] },
                y: { range: yMax ? [0, yMax] : function (u, min, max) { return [0, Math.max(1, max) * 1.2]; } } },
      axes: [{ label: "round", incrs: [1, 2, 5], values: function (u, vals) { return vals.map(function (v) { return String(v); }); } }, {}],
      series: [{ label: "round" }].concat(series.map(function (s) {
        return { label: s.label, stroke: s.color, width: 2, points: { size: 6 }, spanGaps: false };
      })),
      hooks: { draw: [function (u) { drawPointTexts(u, plot.series); }] }
    }, data, container);
    setCaption(container, caption, width);
  }

  function setCaption(container, caption, width) {
    if (!caption) return;
    var note = container.querySelector(".lab-caption");
    if (!note) {
      note = container.appendChild(el("div", null, "lab-caption small text-muted"));
      note.style.maxWidth = (width || container.clientWidth) + "px";
    }
    note.textContent = caption;
  }

  var RATE_MAX = 1.15;  // room above 100 % for a point's text
  var RATE_NOTE = "Each point: the rate and n; bars: 95 % Wilson interval (R's prop.test(x, n, correct = FALSE)).";

  function renderGames(d) {
    Object.keys(d.games).forEach(function (game) {
      var g = d.games[game];
      // A game that names no cooperative choice has no cooperation rate (nor agreement to cooperate).
      if (g.human_cooperation) {
        var coop = [rateLine("humans", "#1f77b4", g.human_cooperation)];
        if (g.agent_cooperation) coop.push(rateLine("agents", "#d62728", g.agent_cooperation));
        drawPlot(game + "-coop", game + ": cooperation rate (" + g.cooperative_choice + ") per round", g.rounds,
          coop, RATE_MAX, RATE_NOTE + " n: decisions (a late decision's random choice included).");
      }
      if (g.agreement) {
        drawPlot(game + "-agree", game + ": agreement & breach rate (proxy)", g.rounds, [
          rateLine("agreement", "#2ca02c", g.agreement),
          rateLine("breach | agreement", "#ff7f0e", g.breach)], RATE_MAX,
          g.agreements_total + " agreements and " + g.breaches_total + " breaches in " + g.pairs_total +
          " pair-rounds so far. How the proxy is computed: a pair-round is an agreement when each side's " +
          "latest message sent in time that names a choice proposes " + g.cooperative_choice + ", read as a " +
          "person would (English, Chinese and German, negation, the other choice named; the article \"a\" is " +
          "not option A; lab/experimenter/proposals.py); a breach is an agreement followed by at least one " +
          g.other_choices.join(" or ") + ". n: pair-rounds decided (agreement), " +
          "agreements (breach). Not the annotated measure of SI Note 2. " + RATE_NOTE);
      }
      var late = [countLine("decisions timed out (random choice)", "#9467bd", g.humans_timed_out)];
      if (g.humans_unsent_messages) {
        late.unshift(countLine("messages not sent in time", "#8c564b", g.humans_unsent_messages));
      }
      drawPlot(game + "-late", game + ": humans late, per round", g.rounds, late, null,
        "Each point: how many of how many (humans' messages or decisions that round).");
      if (g.agent_fallbacks) {
        var colors = ["#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];
        var reasons = Object.keys(g.agent_fallbacks);
        var fallbacks = reasons.map(function (reason, i) {
          return countLine(reason, colors[i % colors.length], g.agent_fallbacks[reason]);
        });
        if (!fallbacks.length) {
          fallbacks = [countLine("none so far", "#7f7f7f", { count: g.rounds.map(function () { return null; }), of: [] })];
        }
        drawPlot(game + "-fallbacks", game + ": agents' fallbacks by reason, per round", g.rounds, fallbacks, null,
          "Each point: the agents' turns that fell back for this reason, of the agents' turns that round " +
          "(messages and decisions; a provider's failure, not lateness).");
      }
    });
  }

  function renderEarnings(d) {
    var e = d.earnings;
    var cur = " " + e.currency;
    var spread = function (s, digits, unit) {
      return s ? num(s.mean, digits) + " / " + num(s.min, digits) + " / " + num(s.max, digits) + (unit || "") : "–";
    };
    var rows = [
      ["participants (opened their link)", e.participants],
      ["points so far per participant, mean / min / max", spread(e.points, 1)],
      ["money so far per participant (show-up fee + points × " + e.currency_per_point + "), mean / min / max",
        spread(e.money, 2, cur)],
      ["session cost so far: " + e.participants + " × " + num(e.participation_fee, 2) + " show-up fee + " +
        e.points_total + " points × " + e.currency_per_point, num(e.payout_so_far, 2) + cur],
      [e.norm_estimates ? "expected total payout, at most: cost so far + norm bonuses (" + e.participants + " × " +
        e.norm_estimates + " estimates × " + num(e.norm_bonus, 2) + ")"
        : "expected total payout: cost so far (no norm bonus in this session)", num(e.payout_at_most, 2) + cur]];
    if (e.settled_participants) {
      rows.push(["payouts settled on the payment page (" + e.settled_participants + " participants)",
        num(e.settled_payout, 2) + cur]);
    }
    fillTable(document.getElementById("dash-earnings"), ["", ""], rows);
  }

  function renderAgents(d) {
    var agentsBlock = document.getElementById("dash-agents-block");
    if (!d.agents) { agentsBlock.style.display = "none"; return; }
    var a = d.agents;
    var join = function (counts) {
      return Object.keys(counts).map(function (k) { return k + ": " + counts[k]; }).join(", ");
    };
    var failed = {};
    Object.keys(a.calls_by_status).forEach(function (k) { if (k !== "ok") failed[k] = a.calls_by_status[k]; });
    var rows = [["model", a.model]];
    if (a.model_problem) {
      var problem = el("strong", "this server cannot call it: " + a.model_problem + "; its agents' turns fall back",
        "text-danger");
      rows.push(["model unavailable", problem]);
    }
    fillTable(document.getElementById("dash-agents"), ["", ""], rows.concat([
      ["calls", a.calls + " (answered: " + a.answered_calls + ", failed: " + a.failed_calls + ")"],
      ["failed calls by status", join(failed) || "none"],
      ["latency p50 / p95 of answered calls (n = " + a.latency_n + ")",
        num(a.latency_p50, 2) + " s / " + num(a.latency_p95, 2) + " s"],
      ["fallbacks by reason", join(a.fallbacks_by_reason) || "none"],
      ["spent / budget", num(a.spent, 4) + " / " + (a.budget === null ? "no limit" : num(a.budget, 2)) + " USD"],
      ["model check", a.model_check],
      ["grammar", a.model_grammar || "not recorded"],
      ["capacity", capacityCell(a)]]));
  }

  // The server's capacity for the session (the model check's sentence), red when it fits narrowly.
  function capacityCell(a) {
    if (!a.model_capacity) return "not measured (cloud provider, or no model check)";
    var cell = el("span", a.model_capacity);
    cell.id = "dash-capacity";
    if (a.model_capacity_verdict !== "fits") cell.className = "text-danger";
    return cell;
  }

  function render(d) {
    lastUpdate = d.generated_at;
    root.classList.remove("lab-stale");
    var status = document.getElementById("dash-status");
    status.textContent = d.treatment + " (" + d.associate_type + ") · label-" + d.label_setting + " · " + d.game_order + " · " +
      d.rounds_per_game + " rounds · updated " + clock(d.generated_at);

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
    var pr = d.progress;
    if (pr.stuck_in_quiz.length) {
      var failedBy = {};
      pr.participants.forEach(function (p) { failedBy[p.code] = p.quiz_failed; });
      alerts.appendChild(el("div", "Stuck in the quiz (" + pr.quiz_stuck_failed_attempts + " or more failed attempts, " +
        "or " + pr.quiz_stuck_seconds + " s or more on it): " + pr.stuck_in_quiz.map(function (c) {
          return c + " (" + failedBy[c] + " failed)"; }).join(", "), "alert alert-warning py-1 lab-quiz-stuck"));
    }
    if (pr.idle.length) alerts.appendChild(el("div", "Idle (over " + pr.idle_after_seconds +
      " s on a page): " + pr.idle.join(", "), "alert alert-warning py-1"));
    if (pr.closed_tabs.length) alerts.appendChild(el("div", "Closed tab (oTree's wait-page connection): " +
      pr.closed_tabs.join(", "), "alert alert-danger py-1"));

    fillTable(document.getElementById("dash-waits"), ["app", "round", "spread (s)", "slowest"],
      d.round_start_waits.slice(-10).map(function (w) { return [w.app, w.round, w.spread_seconds, w.slowest]; }));

    renderEarnings(d);
    renderGames(d);
    renderAgents(d);

    // Those who need attention first: stuck in the quiz, idle, closed tab, then the rest in order.
    var rank = function (p) { return p.stuck_in_quiz ? 0 : p.idle ? 1 : p.tab === "closed" ? 2 : 3; };
    var participants = pr.participants.slice().sort(function (a, b) { return rank(a) - rank(b) || a.id - b.id; });
    // The experimenter's actions (dashboard-actions.js) draw their own buttons and controls.
    var actions = window.labDashboardActions;
    if (actions) actions.render(d);
    fillTable(document.getElementById("dash-participants"), ["#", "code (replay)", "label", "app", "round", "page",
      "on page (s)", "tab", "quiz failed", "state", "actions"], participants.map(function (p) {
        var state = p.finished ? "finished" : p.stuck_in_quiz ? "STUCK IN QUIZ" : p.idle ? "IDLE" :
          p.on_wait_page ? "waiting" : "";
        return [p.id, replayLink(d.session_code, p.code), p.label, p.app, p.round, p.page, p.seconds_on_page, p.tab,
          p.quiz_failed, state, actions ? actions.buttons(p) : ""];
      }));
  }

  // The poll failed: say why, keep the last data greyed out, and say how old it is.
  function showProblem(message, loginLink) {
    root.classList.add("lab-stale");
    var status = document.getElementById("dash-status");
    status.textContent = "";
    var alert = el("span", message, "text-danger fw-bold");
    status.appendChild(alert);
    if (loginLink) {
      status.appendChild(document.createTextNode(": "));
      var a = el("a", "log in again", "lab-login-link");
      a.href = "/login";
      a.target = "_blank";  // this page keeps polling and resumes once logged in
      status.appendChild(a);
    }
    status.appendChild(document.createTextNode(" · the data below is from the last update, " +
      (lastUpdate ? clock(lastUpdate) : "never")));
  }

  function refresh() {
    fetch(root.dataset.url, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (r) {
        var type = r.headers.get("content-type") || "";
        // oTree answers a request without the admin login by its login page (or our 401).
        if (r.status === 401 || (r.redirected && /\/login/.test(r.url)) || (r.ok && type.indexOf("json") < 0)) {
          throw { loggedOut: true };
        }
        if (!r.ok) throw new Error("the server answered " + r.status);
        return r.json();
      })
      .then(render)
      .catch(function (e) {
        if (e && e.loggedOut) showProblem("logged out", true);
        else showProblem("update failed (" + (e && e.message) + "), retrying every " +
          Math.round((Number(root.dataset.refreshMs) || 3000) / 1000) + " s", false);
      });
  }

  render(JSON.parse(document.getElementById("dashboard-data").textContent));
  setInterval(refresh, Number(root.dataset.refreshMs) || 3000);
  window.labDashboardRefresh = refresh;  // after an action, at once
})();
