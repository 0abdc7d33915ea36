/* What a participant types, counted and limited as the server counts it (lab/text.py):
   line breaks as one character, NFC, control characters removed, code points (an emoji or a
   Chinese character is one character, whatever JavaScript's UTF-16 length says). The textarea
   has no maxlength attribute: Chromium's counts UTF-16 units and would cut emoji differently. */
var LabText = (function () {
  var LINE_BREAK = /\r\n?/g;
  var REMOVED = /[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffd]/gu;

  function clean(text) {
    return (text || '').replace(LINE_BREAK, '\n').replace(REMOVED, '').normalize('NFC');
  }

  function length(text) {
    return Array.from(clean(text)).length;
  }

  /* Cut what was just typed or pasted (the `inserted` characters before the caret) so that
     the box holds at most `max` characters, as maxlength would; text that was already there is
     never cut (a box refilled over the limit keeps everything and shows the counter red). */
  function limit(box, max, inserted) {
    var excess = Math.min(length(box.value) - max, inserted);
    if (excess <= 0) return;
    var caret = box.selectionEnd;
    var before = Array.from(box.value.slice(0, caret));
    var after = box.value.slice(caret);
    var removed = 0;
    while (removed < inserted && before.length && length(before.join('') + after) > max) {
      var cut = Math.min(length(before.join('') + after) - max, inserted - removed, before.length);
      before.splice(before.length - cut, cut);
      removed += cut;
    }
    var head = before.join('');
    box.value = head + after;
    box.setSelectionRange(head.length, head.length);
  }

  /* The box's counter and limit, and its draft kept in the browser until the page is left
     (lab-page.js removes drafts of the participant's other pages): it survives a reload, a
     server restart and a rejected submission. The server is told the draft too (lab-notices.js),
     at most every DRAFT_SEND_MS while typing and once more after the last key: a page submitted
     without the browser keeps it. */
  var DRAFT_SEND_MS = 250;
  function messageBox(box, counter, max) {
    var key = 'lab-draft:' + window.location.pathname;
    var sentAt = 0, trailing = null;
    function tellServer() {
      clearTimeout(trailing);
      trailing = null;
      sentAt = Date.now();
      if (window.labNotices) window.labNotices.draft(box.value);
    }
    function save() {
      try {
        if (box.value) localStorage.setItem(key, box.value); else localStorage.removeItem(key);
      } catch (e) { /* storage full or disabled: the server still gets what is in the box */ }
      var wait = sentAt + DRAFT_SEND_MS - Date.now();
      if (wait <= 0) tellServer();
      else if (!trailing) trailing = setTimeout(tellServer, wait);
    }
    function update() {
      var remaining = max - length(box.value);
      counter.textContent = remaining;
      counter.parentNode.classList.toggle('lab-over', remaining <= 0);
    }
    var previous = length(box.value);
    var composing = false;
    function afterInput() {
      var now = length(box.value);
      if (now > previous) limit(box, max, now - previous);
      previous = length(box.value);
      update();
      save();
    }
    // An input method's candidate is not cut mid-composition, only when it is committed.
    box.addEventListener('compositionstart', function () { composing = true; });
    box.addEventListener('compositionend', function () { composing = false; afterInput(); });
    box.addEventListener('input', function (event) {
      if (composing || event.isComposing) { update(); return; }
      afterInput();
    });
    var draft = null;
    try { draft = localStorage.getItem(key); } catch (e) { }
    if (!box.value && draft) box.value = draft;
    previous = length(box.value);
    box.setSelectionRange(box.value.length, box.value.length);
    update();
    save();
  }

  return {clean: clean, length: length, messageBox: messageBox};
})();
