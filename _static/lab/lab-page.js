/* On every participant page (loaded by _templates/otree/Base_UserFacing.html).

   A lab server may go down (crash, kill -9, restart) while participants have their pages open.
   A form submitted meanwhile would leave the tab on the browser's "This site can't be reached"
   page, which needs a manual reload on every cubicle PC. Instead, every submission of the page's
   form (the Next button, a choice button, oTree's timer at the limit) first checks that the
   server answers; if it does not, the page says it is reconnecting, keeps everything that was
   typed, and submits as soon as the server is back. When oTree's own websockets lose the
   server, the page shows the same notice and, once the server answers again, reloads itself
   unless the participant has a form to fill in (oTree's websockets then move the page on if the
   server advanced it meanwhile). */
(function () {
  var PING_URL = '/static/lab/ping.txt';
  var RETRY_MS = 2000;
  var script = document.currentScript;
  // The notice comes from the page, in the session's language; oTree's own pages (wait pages,
  // rooms) have none and reuse the one the participant's last lab page gave.
  var notice = script && script.dataset.reconnecting;
  try {
    if (notice) localStorage.setItem('lab-reconnecting-text', notice);
    else notice = localStorage.getItem('lab-reconnecting-text');
  } catch (e) { }
  notice = notice || '…';

  // Drafts of this participant's other pages are obsolete once a page of theirs loads.
  var participant = window.location.pathname.match(/^\/p\/[^/]+\//);
  if (participant) {
    try {
      for (var i = localStorage.length - 1; i >= 0; i--) {
        var key = localStorage.key(i);
        if (key && key.indexOf('lab-draft:' + participant[0]) === 0 && key !== 'lab-draft:' + window.location.pathname) {
          localStorage.removeItem(key);
        }
      }
    } catch (e) { }
  }

  function serverAnswers() {
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, 3000);
    return fetch(PING_URL + '?t=' + Date.now(), {cache: 'no-store', signal: controller.signal})
      .then(function (response) { clearTimeout(timer); return response.ok; })
      .catch(function () { clearTimeout(timer); return false; });
  }

  var banner = null;
  function showNotice() {
    if (banner) return;
    banner = document.createElement('div');
    banner.id = 'lab-reconnecting';
    banner.setAttribute('role', 'status');
    banner.textContent = notice;
    banner.style.cssText = 'position:fixed;top:0;left:0;right:0;z-index:9999;padding:.6rem 1rem;' +
      'background:#fff3cd;color:#664d03;border-bottom:1px solid #ffecb5;text-align:center;font-size:1.1rem';
    document.body.appendChild(banner);
  }
  function hideNotice() {
    if (banner) { banner.remove(); banner = null; }
  }

  // Resolves with whether the server was unreachable at least once, as soon as it answers.
  var waiting = null;
  function whenServerBack() {
    if (!waiting) {
      waiting = new Promise(function (resolve) {
        var wasDown = false;
        (function attempt() {
          serverAnswers().then(function (ok) {
            if (ok) { waiting = null; hideNotice(); resolve(wasDown); }
            else { wasDown = true; showNotice(); setTimeout(attempt, RETRY_MS); }
          });
        })();
      });
    }
    return waiting;
  }

  // --- submissions ---------------------------------------------------------------------
  var nativeSubmit = HTMLFormElement.prototype.submit;
  var checked = false;      // this submission's check passed: let it through
  var submitting = false;   // a check is under way: ignore further clicks

  function submitWhenServerAnswers(form, submitter) {
    if (submitting) return;
    submitting = true;
    whenServerBack().then(function () {
      checked = true;
      if (submitter && form.requestSubmit) form.requestSubmit(submitter);
      else nativeSubmit.call(form);
    });
  }

  document.addEventListener('submit', function (event) {
    var form = event.target;
    if (form.id !== 'form' || checked) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    submitWhenServerAnswers(form, event.submitter);
  }, true);

  function guardFormSubmit() {
    var form = document.getElementById('form');
    // oTree's timer calls jQuery's submit(), which ends in form.submit(): no submit event.
    if (form) form.submit = function () {
      if (checked) nativeSubmit.call(form); else submitWhenServerAnswers(form, null);
    };
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', guardFormSubmit);
  else guardFormSubmit();

  // --- oTree's websockets ----------------------------------------------------------------
  var leaving = false;
  // A page moves on once. A second reload while the first is still loading (oTree's wait page
  // reloads on every socket message, a timer may reload too) aborts the first, and on a busy
  // server that repeats: the participant sees a page that never arrives. Once the page has
  // started to leave (beforeunload fires synchronously with the navigation), further socket
  // messages and timers stand down; after NAVIGATION_STUCK_MS they may try again.
  var NAVIGATION_STUCK_MS = 15000;
  var navigatingSince = 0;
  window.labNavigating = function () {
    return navigatingSince > 0 && Date.now() - navigatingSince < NAVIGATION_STUCK_MS;
  };
  window.addEventListener('pagehide', function () { leaving = true; });
  window.addEventListener('beforeunload', function () { leaving = true; navigatingSince = Date.now(); });
  // {"status": "ready", "to": "app/Page/index"}: this participant's next page, else null.
  var PAGE_ADDRESS = /^[A-Za-z0-9_]+\/[A-Za-z0-9_]+\/[0-9]+$/;
  function movedTo(text) {
    var data;
    try { data = JSON.parse(text); } catch (e) { return null; }
    if (!data || data.status !== 'ready' || typeof data.to !== 'string' || !PAGE_ADDRESS.test(data.to)) return null;
    var here = window.location.pathname.match(/^\/p\/[^/]+\//);
    return here ? here[0] + data.to : null;
  }
  var NativeWebSocket = window.WebSocket;
  if (NativeWebSocket) {
    var Watched = function (url, protocols) {
      var socket = protocols === undefined ? new NativeWebSocket(url) : new NativeWebSocket(url, protocols);
      // Registered before oTree's own handler, so it can keep a message from reaching it.
      socket.addEventListener('message', function (event) {
        if (window.labNavigating()) { event.stopImmediatePropagation(); return; }
        var destination = movedTo(event.data);
        if (destination) {
          // A wait page for everyone has moved this participant on (lab/wait_for_all.py): go
          // straight to the next page instead of reloading this one to be redirected there.
          event.stopImmediatePropagation();
          window.location.replace(destination);
        }
      });
      socket.addEventListener('close', function () {
        if (leaving || submitting) return;
        whenServerBack().then(function (wasDown) {
          if (!wasDown || leaving || submitting) return;
          var form = document.getElementById('form');
          var hasInputs = form && form.querySelector('input:not([type=hidden]), textarea, select, button[name]');
          if (!hasInputs) window.location.reload();
        });
      });
      return socket;
    };
    Watched.prototype = NativeWebSocket.prototype;
    ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED'].forEach(function (name) { Watched[name] = NativeWebSocket[name]; });
    window.WebSocket = Watched;
  }
})();
