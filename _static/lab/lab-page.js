/* On every participant page (loaded by _templates/otree/Base_UserFacing.html).

   A lab server may go down (crash, kill -9, restart), and an online participant's network may
   drop, while participants have their pages open. A form the browser submits itself then leaves
   the tab on Chromium's error page (chrome-error://chromewebdata/), where no script runs, until
   someone reloads; what was typed never reaches the server. So the page's form (the Next
   button, a choice button, oTree's timer at the limit) is submitted by this script: it checks
   that the server answers, sends the form's POST itself, and shows the answer as the browser
   would. If the request fails (network, server gone, a 5xx), the page stays, says it is
   reconnecting, keeps everything that was typed, and sends the same submission again as soon as
   the server answers. A second copy is harmless: oTree's page addresses are indexed, so a POST
   to a page the participant has already left is redirected to where they are
   (tests/test_network_drop.py). When oTree's own websockets lose the server, the page shows the
   same notice and, once the server answers again, reloads itself unless the participant has a
   form to fill in (oTree's websockets then move the page on if the server advanced it
   meanwhile). */
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

  // --- leaving the page ------------------------------------------------------------------
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
  function startLeaving() { leaving = true; navigatingSince = Date.now(); }
  window.addEventListener('beforeunload', startLeaving);

  // --- submissions ---------------------------------------------------------------------
  var nativeSubmit = HTMLFormElement.prototype.submit;
  // A request still unanswered after this long makes the page check the server; if it was
  // away meanwhile, the request is abandoned and sent again (a connection cut without a reset,
  // a laptop asleep, may otherwise hang for minutes). A slow server is simply waited for.
  var SLOW_MS = 5000;
  // A server that answers the ping but fails the page (5xx) this many times in a row is shown
  // as it is (a fault of the page, not an outage: the browser would have shown it at once).
  var MAX_SERVER_ERRORS = 5;
  // Requests that fail this many times in a row while the server answers the ping at once fail
  // for a reason this script does not know: the browser then submits the form itself.
  var MAX_UNEXPLAINED_FAILURES = 3;
  // If the browser has not replaced the document after this long, the page is asked for again.
  var SHOW_FALLBACK_MS = 3000;
  var submitting = false;   // this page's submission is under way: ignore further ones
  var byBrowser = false;    // ... and the browser submits it

  function handledHere(form) {
    if (form.id !== 'form' || byBrowser) return false;
    if ((form.method || '').toLowerCase() !== 'post' || (form.target && form.target !== '_self')) return false;
    try { return new URL(form.action).origin === window.location.origin; } catch (e) { return false; }
  }

  // What the browser would send: the form's fields and the button that submitted it (a choice
  // button's name and value), encoded as the form says (oTree's: urlencoded). Read once: a
  // retry sends what was submitted.
  function submissionOf(form, submitter) {
    var data = new FormData(form);
    if (submitter && submitter.name) data.append(submitter.name, submitter.value);
    var multipart = (form.enctype || '').toLowerCase() === 'multipart/form-data';
    return {form: form, submitter: submitter, action: form.action,
            body: multipart ? data : new URLSearchParams(data), serverErrors: 0, unexplainedFailures: 0};
  }

  function submit(form, submitter) {
    if (submitting) return;
    submitting = true;
    var submission = submissionOf(form, submitter);
    whenServerBack().then(function () { send(submission); });
  }

  function send(submission) {
    var controller = new AbortController();
    var settled = false;
    var serverWasAway = false;
    (function watch() {
      setTimeout(function () {
        if (settled) return;
        whenServerBack().then(function (wasDown) {
          if (settled) return;
          if (wasDown) { serverWasAway = true; controller.abort(); } else watch();
        });
      }, SLOW_MS);
    })();
    // The redirect is not followed here: the browser follows it below, as after a form's POST.
    fetch(submission.action, {method: 'POST', body: submission.body, redirect: 'manual', cache: 'no-store',
                              credentials: 'same-origin', signal: controller.signal})
      .then(function (response) {
        if (response.type === 'opaqueredirect') {
          settled = true;
          goToPageAfter();
          return;
        }
        var serverError = response.status >= 500 && ++submission.serverErrors < MAX_SERVER_ERRORS;
        return response.text().then(function (html) {
          settled = true;
          if (serverError) sendAgain(submission, false);
          else show(html);
        });
      })
      .catch(function () {
        // The network or the server went away, before or after the server took the submission:
        // sent again when the server answers. If it had been taken, oTree redirects the copy.
        settled = true;
        sendAgain(submission, !serverWasAway);
      });
  }

  // After RETRY_MS (no request loop against a server that answers) and once the server answers.
  // A network failure is unexplained if the server was never away.
  function sendAgain(submission, networkFailure) {
    showNotice();
    setTimeout(function () {
      whenServerBack().then(function (wasDown) {
        submission.unexplainedFailures = networkFailure && !wasDown ? submission.unexplainedFailures + 1 : 0;
        if (submission.unexplainedFailures >= MAX_UNEXPLAINED_FAILURES) submitByBrowser(submission);
        else send(submission);
      });
    }, RETRY_MS);
  }

  function submitByBrowser(submission) {
    var submitter = submission.submitter;
    if (submitter && submitter.name) {
      var field = document.createElement('input');
      field.type = 'hidden';
      field.name = submitter.name;
      field.value = submitter.value;
      submission.form.appendChild(field);
    }
    byBrowser = true;
    startLeaving();
    nativeSubmit.call(submission.form);
  }

  // oTree answers a submission it took (or one for a page the participant has already left)
  // with a redirect to the page they are to be on; asking for the submitted page again gets the
  // same redirect, which the browser follows as it would have followed the POST's.
  function goToPageAfter() {
    startLeaving();
    hideNotice();
    window.location.replace(window.location.href);
  }

  // Any other answer (the page again with its form errors, HTTP 200; a 4xx) as the browser
  // would show it, without asking the server again: a new document from the answer (a
  // javascript: URL navigation: the page's scripts run afresh in a new window object, as after
  // a navigation) at the same address. Asking again would lose the form errors, and submitting
  // again would count a quiz attempt twice.
  function show(html) {
    startLeaving();
    hideNotice();
    window.labAnswerDocument = html;
    setTimeout(function () { window.location.replace(window.location.href); }, SHOW_FALLBACK_MS);
    window.location.replace('javascript:window.labAnswerDocument');
  }

  window.addEventListener('submit', function (event) {
    var form = event.target;
    // Last to see the event: the page's own handlers ran, and one of them may have cancelled it.
    if (event.defaultPrevented || !handledHere(form)) return;
    event.preventDefault();
    submit(form, event.submitter);
  });

  function guardFormSubmit() {
    var form = document.getElementById('form');
    // oTree's timer calls jQuery's submit(), which ends in form.submit(): no submit event.
    if (form) form.submit = function () {
      if (handledHere(form)) submit(form, null); else nativeSubmit.call(form);
    };
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', guardFormSubmit);
  else guardFormSubmit();

  // --- oTree's websockets ----------------------------------------------------------------
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
