/* The dashboard's actions (lab/interventions.py): advance a participant, mark them dropped, send
   them a message, pause and resume the session. Each asks for confirmation, naming the
   participant and the action, then POSTs to /LabIntervene/<code> with oTree's CSRF token; the
   server needs the admin login and records the action. dashboard.js draws the buttons in the
   participants' table (``buttons``) and calls ``render`` with every update. Text goes in with
   textContent only. */
(function () {
  "use strict";
  var root = document.getElementById("lab-dashboard");
  var url = root.dataset.actionsUrl;
  var last = null;  // the latest dashboard data

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function csrfToken() {
    var input = document.querySelector("#dash-csrf input[name=csrftoken]");
    return input ? input.value : "";
  }

  function describe(p) {
    return "participant #" + p.id + " (" + p.code + (p.label ? ", label " + p.label : "") + ")";
  }

  function showResult(text, ok) {
    var box = document.getElementById("dash-action-result");
    box.textContent = text;
    box.className = "small mt-1 " + (ok ? "text-success" : "text-danger fw-bold");
  }

  function post(fields, what) {
    var body = new FormData();
    body.append("csrftoken", csrfToken());
    Object.keys(fields).forEach(function (k) { body.append(k, fields[k]); });
    return fetch(url, { method: "POST", body: body, credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.text().then(function (text) {
          var data = null;
          try { data = JSON.parse(text); } catch (e) { data = null; }
          if (r.ok && data && data.ok) {
            showResult(what + ": done (" + new Date().toLocaleTimeString() + ")", true);
            if (window.labDashboardRefresh) window.labDashboardRefresh();
          } else {
            var why = data && data.error ? data.error : "the server answered " + r.status + " " + text.slice(0, 200);
            showResult(what + ": NOT done: " + why, false);
          }
        });
      })
      .catch(function (e) { showResult(what + ": NOT done: " + (e && e.message), false); });
  }

  var QUESTIONS = {
    advance: function (p) {
      return "Advance " + describe(p) + " by one page, now on " + p.app + " round " + p.round + " " + p.page +
        "?\n\nTheir page is submitted as if its time had run out: a random choice (flagged timed out), " +
        "a message not sent.";
    },
    mark_dropped: function (p) {
      return "Mark " + describe(p) + " as dropped?\n\nThe stand-in takes over their seat; they are sent to their exit page.";
    }
  };

  function act(action, p) {
    var what = action.replace("_", " ") + " " + describe(p);
    if (action === "message") {
      var text = window.prompt("Message to " + describe(p) + " (it pops up on their page until they close it):", "");
      if (text === null || !text.trim()) return;
      if (!window.confirm("Send this message to " + describe(p) + "?\n\n" + text)) return;
      post({ action: action, participant: p.code, text: text }, "message to " + describe(p));
      return;
    }
    if (!window.confirm(QUESTIONS[action](p))) return;
    var fields = { action: action, participant: p.code };
    // Advance the page the experimenter saw, not one the participant has reached since.
    if (action === "advance") fields.page_index = p.page_index;
    post(fields, what);
  }

  function button(action, label, p, disabled, title) {
    var b = el("button", label, "btn btn-sm btn-outline-secondary py-0 px-1 me-1");
    b.type = "button";
    b.dataset.action = action;
    b.dataset.participant = p.code;
    b.disabled = Boolean(disabled);
    if (title) b.title = title;
    b.addEventListener("click", function () { act(action, p); });
    return b;
  }

  // The actions cell of one participant's row.
  function buttons(p) {
    var cell = el("span", null, "text-nowrap");
    var dropAvailable = last && last.control && last.control.mark_dropped_available;
    cell.appendChild(button("advance", "advance", p, p.finished || !p.app || p.on_wait_page,
      p.on_wait_page ? "on a wait page: nothing to submit" : "submit their page as a timeout"));
    cell.appendChild(button("mark_dropped", "drop", p, p.finished || !dropAvailable,
      dropAvailable ? "mark dropped: the stand-in takes over" : "online sessions only"));
    cell.appendChild(button("message", "message", p, false, "a message that pops up on their page"));
    return cell;
  }

  function clock(epoch) {
    return epoch ? new Date(epoch * 1000).toLocaleTimeString() : "";
  }

  function render(d) {
    last = d;
    var c = d.control;
    if (!c) return;
    var pauseButton = document.getElementById("dash-pause");
    pauseButton.textContent = c.paused ? "Resume session" : "Pause session";
    pauseButton.dataset.action = c.paused ? "resume" : "pause";
    pauseButton.className = "btn btn-sm " + (c.paused ? "btn-success" : "btn-warning");
    var status = document.getElementById("dash-paused");
    status.textContent = c.paused ? "PAUSED since " + clock(c.paused_at) + " (" +
      Math.round(d.generated_at - c.paused_at) + " s): no page times out" : "";
    status.className = c.paused ? "ms-2 badge bg-danger" : "ms-2";

    var online = document.getElementById("dash-online");
    if (online) {
      online.textContent = "";
      if (c.online) {
        online.appendChild(el("h5", "Dropouts (online; stand-in rule: " + c.online.rule + ")"));
        online.appendChild(el("div", "dropped participants: " + c.online.dropped.length +
          " · stand-in pair-rounds: " + c.online.stand_in_pair_rounds +
          " · pair-rounds finished alone: " + c.online.alone_pair_rounds, "dash-online-counts"));
        var dropped = el("table", null, "table table-sm");
        dropped.id = "dash-dropped";
        c.online.dropped.forEach(function (row) {
          var tr = el("tr");
          tr.dataset.participant = row.code;
          [row.code, row.reason, row.by, clock(row.at)].forEach(function (cell) { tr.appendChild(el("td", cell)); });
          dropped.appendChild(tr);
        });
        online.appendChild(dropped);
      }
    }

    var table = document.getElementById("dash-interventions");
    table.textContent = "";
    document.getElementById("dash-interventions-count").textContent =
      "(" + c.interventions_total + (c.interventions_total > c.interventions.length ? ", the latest " + c.interventions.length : "") + ")";
    var head = el("tr");
    ["time", "who", "action", "participant", "what", "closed by the participant"].forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(head);
    c.interventions.forEach(function (row) {
      var tr = el("tr");
      tr.dataset.action = row.action;
      var what = row.action === "message" ? row.detail.text : JSON.stringify(row.detail);
      [clock(row.at), row.who, row.action, row.participant_code, what, row.action === "message" ? clock(row.dismissed_at) || "not yet" : ""]
        .forEach(function (cell) { tr.appendChild(el("td", cell)); });
      table.appendChild(tr);
    });
  }

  document.getElementById("dash-pause").addEventListener("click", function () {
    var code = last ? last.session_code : "";
    if (this.dataset.action === "resume") {
      if (!window.confirm("Resume session " + code + "?\n\nEvery page's and agent's deadline moves later by the pause's length.")) return;
      post({ action: "resume" }, "resume session " + code);
    } else {
      if (!window.confirm("Pause session " + code + "?\n\nNo page times out while paused; every participant sees a " +
        "'paused' notice over their page, and their time stands still.")) return;
      post({ action: "pause" }, "pause session " + code);
    }
  });

  window.labDashboardActions = { buttons: buttons, render: render };
})();
