/* On every participant page (loaded by _templates/otree/Base_UserFacing.html): what the
   experimenter sends from the dashboard (lab/notices.py, lab/interventions.py).

   - A message pops up over the page, as text, covering it until the participant closes it (the
     page's timer runs on); the close is sent to the server (which records it) and closes it in
     the participant's other tabs too. A message not yet closed shows again on every page they
     open.
   - While the session is paused, a "paused" notice covers the page, the page's timer stands
     still and the page cannot be submitted; on resume the timer goes on with the time it had
     left (the server moved the deadline by the pause's length), and a wait page asks again.

   The page's state at render is the JSON block #lab-notices-state; what happens later comes on
   the page's own socket, which also replays what was sent between the render and its
   connection.

   A message box (text.js) tells the server what it holds on the same socket
   (window.labNotices.draft): a page submitted without its browser keeps it as its unsent draft. */
(function () {
  var stateNode = document.getElementById('lab-notices-state');
  if (!stateNode) return;
  var state;
  try { state = JSON.parse(stateNode.textContent); } catch (e) { return; }
  var texts = state.texts || {};
  var paused = false;
  var shown = {};      // message id -> its element
  var dismissed = {};  // message ids closed here or in another tab
  var lastSessionEvent = 0;  // sent_at of the last pause/resume applied (the socket replays)
  var socket = null;

  function whenBody(fn) {
    if (document.body) fn();
    else document.addEventListener('DOMContentLoaded', fn);
  }

  // --- messages -----------------------------------------------------------------------------
  // The messages cover the page (above the "paused" notice) until each is closed.
  var stack = null;
  function messageStack() {
    if (!stack) {
      stack = document.createElement('div');
      stack.id = 'lab-notices';
      stack.style.cssText = 'position:fixed;inset:0;z-index:10001;background:rgba(0,0,0,.35);display:flex;' +
        'flex-direction:column;align-items:center;padding-top:10vh;overflow:auto';
    }
    if (!stack.parentNode) document.body.appendChild(stack);
    return stack;
  }

  function showMessage(id, text) {
    if (shown[id] || dismissed[id]) return;
    var box = document.createElement('div');
    box.className = 'lab-notice card shadow mb-2';
    box.style.cssText = 'width:min(36rem,92vw);flex:none';
    box.setAttribute('role', 'alertdialog');
    box.dataset.noticeId = String(id);
    var body = document.createElement('div');
    body.className = 'card-body';
    var title = document.createElement('h5');
    title.className = 'card-title';
    title.textContent = texts.experimenter_message_title || '';
    var content = document.createElement('p');
    content.className = 'lab-notice-text card-text';
    content.style.whiteSpace = 'pre-wrap';
    content.textContent = text;  // the experimenter's words, never markup
    var button = document.createElement('button');
    button.type = 'button';
    button.className = 'btn btn-primary lab-notice-ok';
    button.textContent = texts.experimenter_message_ok || 'OK';
    button.addEventListener('click', function () { dismiss(id); });
    body.appendChild(title);
    body.appendChild(content);
    body.appendChild(button);
    box.appendChild(body);
    shown[id] = box;
    messageStack().appendChild(box);
    button.focus();
  }

  function closeMessage(id) {
    dismissed[id] = true;
    if (shown[id]) { shown[id].remove(); delete shown[id]; }
    if (stack && !stack.children.length) stack.remove();
  }

  function dismiss(id) {
    closeMessage(id);
    // Sent when the socket is (again) open if it is not now; until the server has it, the
    // message comes back on the participant's next page.
    if (socket) socket.send(JSON.stringify({dismiss: id}));
  }

  // --- pause ----------------------------------------------------------------------------------
  var overlay = null;
  var frozenMs = null;   // the page timer's time left when it was stopped
  var finalDate = null;  // the end oTree's countdown last reported
  if (window.jQuery) {
    jQuery(document).on('update.countdown', '.otree-timer__time-left', function (event) {
      finalDate = event.finalDate;
    });
  }

  function countdown() {
    if (!window.jQuery) return null;
    var timer = jQuery('.otree-timer__time-left');
    return timer.length && timer.data('countdown-instance') !== undefined ? timer : null;
  }

  // While paused, oTree's timer is stopped as soon as it exists (it starts when the page is ready).
  function holdTimer() {
    var timer = countdown();
    if (!paused || !timer) return;
    if (frozenMs === null && finalDate) frozenMs = Math.max(0, finalDate.getTime() - Date.now());
    timer.countdown('stop');
  }

  function showPaused() {
    if (!overlay) {
      overlay = document.createElement('div');
      overlay.id = 'lab-paused';
      overlay.setAttribute('role', 'alertdialog');
      overlay.setAttribute('aria-modal', 'true');
      overlay.style.cssText = 'position:fixed;inset:0;z-index:10000;background:rgba(0,0,0,.55);display:flex;' +
        'align-items:center;justify-content:center';
      var box = document.createElement('div');
      box.className = 'lab-paused-text';
      box.style.cssText = 'background:#fff;border-radius:.5rem;padding:1.5rem 2rem;max-width:32rem;font-size:1.2rem;' +
        'text-align:center';
      box.textContent = texts.experimenter_paused || '…';
      overlay.appendChild(box);
    }
    document.body.appendChild(overlay);
  }

  function setPaused(now) {
    if (now === paused) return;
    paused = now;
    if (paused) {
      whenBody(showPaused);
      holdTimer();
      return;
    }
    if (overlay) overlay.remove();
    var timer = countdown();
    if (timer && frozenMs !== null) timer.countdown(new Date(Date.now() + frozenMs));
    frozenMs = null;
    // A wait page asks again: what it waits for (and the associate's time left) has moved.
    if (document.querySelector('.otree-wait-page')) {
      setTimeout(function () {
        if (!(window.labNavigating && window.labNavigating())) window.location.reload();
      }, Math.random() * 1000);
    }
  }
  setInterval(holdTimer, 200);

  // Nothing is submitted while paused (the Enter key, a click that got through).
  window.addEventListener('submit', function (event) {
    if (!paused) return;
    event.preventDefault();
    event.stopImmediatePropagation();
  }, true);

  // --- the socket -------------------------------------------------------------------------------
  function received(data) {
    if (!data || typeof data.lab_notice !== 'string') return;
    if (data.lab_notice === 'message') whenBody(function () { showMessage(data.id, String(data.text)); });
    else if (data.lab_notice === 'dismissed') closeMessage(data.id);
    else if (data.lab_notice === 'pause' || data.lab_notice === 'resume') {
      if (data.sent_at && data.sent_at <= lastSessionEvent) return;
      lastSessionEvent = data.sent_at || lastSessionEvent;
      setPaused(data.lab_notice === 'pause');
    }
  }

  // What the page's message box holds, for the server (lab/notices.py); the last one is sent
  // again when the socket (re)opens.
  var pageIndex = window.location.pathname.split('/').filter(Boolean).pop();
  var lastDraft = null;
  var sentDraft = null;  // the last draft handed to the open socket (what the server is told)
  function sendDraft() {
    if (lastDraft === null || !socket || socket.readyState !== 1) return;
    try { socket.send(JSON.stringify({draft: lastDraft, page_index: pageIndex})); sentDraft = lastDraft; } catch (e) { }
  }
  window.labNotices = {
    draft: function (text) { lastDraft = String(text); sendDraft(); },
    sentDraft: function () { return sentDraft; }
  };

  setPaused(Boolean(state.paused));
  (state.messages || []).forEach(function (m) { whenBody(function () { showMessage(m.id, String(m.text)); }); });
  if (state.socket && window.makeReconnectingWebSocket) {
    socket = makeReconnectingWebSocket(state.socket);
    socket.addEventListener('open', sendDraft);
    socket.onmessage = function (event) {
      var data;
      try { data = JSON.parse(event.data); } catch (e) { return; }
      received(data);
    };
  }
})();
