// Tabbridge web app: live regions, copy buttons and tidy addresses, in plain
// JavaScript with no build step.
//
// Live regions: an element with an id and data-live="type type…" is fetched
// again (the whole page from body[data-src], then that element swapped in)
// when the event stream announces one of those types. After the stream
// drops and reconnects — the server drops a page that falls behind — every
// region is fetched again, since events may have been missed.
(function () {
  'use strict';
  var body = document.body;
  var src = body.getAttribute('data-src');

  // A page rendered as the answer to a form shows its canonical address, so
  // reloading neither re-sends the form nor shows a one-time secret again.
  if (src && location.pathname !== src) {
    history.replaceState(null, '', src);
  }

  // In the popup the navigation scrolls sideways by itself: keep the
  // current page's entry in view, and fade the edge while more lies beyond.
  function tidyNav() {
    var nav = document.getElementById('nav');
    if (!nav) return;
    var current = nav.querySelector('[aria-current="page"]');
    if (current) {
      var nr = nav.getBoundingClientRect(), cr = current.getBoundingClientRect();
      if (cr.right > nr.right) nav.scrollLeft += cr.right - nr.right + 32;
    }
    var mark = function () { nav.classList.toggle('more', nav.scrollLeft + nav.clientWidth < nav.scrollWidth - 1); };
    if (!nav.hasAttribute('data-tidy')) {
      nav.setAttribute('data-tidy', '');
      nav.addEventListener('scroll', mark, { passive: true });
    }
    mark();
  }
  tidyNav();

  document.addEventListener('click', function (ev) {
    var btn = ev.target.closest && ev.target.closest('[data-copy]');
    if (!btn) return;
    var from = document.getElementById(btn.getAttribute('data-copy'));
    var status = document.getElementById(btn.getAttribute('data-copy') + '-status');
    if (!from) return;
    copy(from.textContent.trim()).then(function () {
      if (status) status.textContent = 'Copied to the clipboard.';
    }, function () {
      selectText(from);
      if (status) status.textContent = 'Selected: press Ctrl+C (⌘C on a Mac) to copy.';
    });
  });

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('aria-hidden', 'true');
      ta.style.position = 'fixed';
      ta.style.opacity = '0';
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
      ta.remove();
      if (ok) { resolve(); } else { reject(new Error('copy refused')); }
    });
  }

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  var regions = document.querySelectorAll('[data-live]');
  if (!src || !regions.length || !window.EventSource) return;
  var types = {};
  regions.forEach(function (r) {
    r.getAttribute('data-live').split(/\s+/).forEach(function (t) { if (t) types[t] = true; });
  });

  var timer = null;
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 60);
  }

  function refresh() {
    fetch(src, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } }).then(function (r) {
      if (r.redirected || !r.ok) {
        // Signed out, or the thing on this page is gone: show what the
        // server says instead of a stale page.
        location.assign(r.redirected ? r.url : src);
        return null;
      }
      return r.text();
    }).then(function (html) {
      if (html === null) return;
      var doc = new DOMParser().parseFromString(html, 'text/html');
      document.querySelectorAll('[data-live]').forEach(function (old) {
        var fresh = doc.getElementById(old.id);
        if (!fresh || fresh.innerHTML === old.innerHTML) return;
        var focused = document.activeElement && old.contains(document.activeElement) ? document.activeElement.id : '';
        // A <details> the person opened stays open across the swap.
        var opened = [];
        old.querySelectorAll('details[open][id]').forEach(function (d) { opened.push(d.id); });
        var node = document.importNode(fresh, true);
        opened.forEach(function (id) {
          var d = node.querySelector('#' + CSS.escape(id));
          if (d) d.setAttribute('open', '');
        });
        old.replaceWith(node);
        if (focused) {
          var again = document.getElementById(focused);
          if (again) again.focus();
        }
      });
      tidyNav();
      if (doc.title) document.title = doc.title;
    }).catch(function () { /* the stream's reconnect will try again */ });
  }

  var broken = false;
  function connect() {
    var es = new EventSource('/api/events');
    Object.keys(types).forEach(function (t) { es.addEventListener(t, schedule); });
    es.onopen = function () {
      body.setAttribute('data-live-state', 'open');
      if (broken) { broken = false; schedule(); }
    };
    es.onerror = function () {
      broken = true;
      body.setAttribute('data-live-state', 'reconnecting');
      if (es.readyState === EventSource.CLOSED) {
        // The server refused the stream (signed out?): let a page fetch
        // find out, and try the stream again a little later.
        schedule();
        setTimeout(connect, 5000);
      }
    };
  }
  connect();
})();
