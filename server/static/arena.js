/* MetaDL Arena: progressive enhancements. Every page works without this file.
 *  - table[data-sortable]: click a column header to sort (numbers by data-sort value).
 *  - [data-live="on"][id]: re-fetch the page every few seconds and swap this element while
 *    something is still queued or running (the server stops marking it "on" when all is done).
 *  - form[data-upload]: send the form with XMLHttpRequest and show upload progress.
 *  - time[data-countdown]: keep "closes in 3 h 12 min" current between page loads.
 *  - form[data-confirm]: ask before sending a form whose action cannot be undone.
 */
(function () {
  "use strict";

  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    var number = Number(raw);
    return raw !== "" && !isNaN(number) ? number : raw.toLowerCase();
  }

  function sortBy(table, index, th) {
    var body = table.tBodies[0];
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      if (x === y) { return 0; }
      if (x === "") { return 1; }       /* empty cells last, whatever the direction */
      if (y === "") { return -1; }
      var order = x < y ? -1 : 1;
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }

  function makeSortable(table) {
    if (!table.tHead || !table.tBodies.length) { return; }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      if (th.hasAttribute("data-nosort")) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) { button.appendChild(th.firstChild); }
      th.appendChild(button);
      button.addEventListener("click", function () { sortBy(table, index, th); });
    });
  }

  function poll(element) {
    var interval = Number(element.getAttribute("data-live-interval")) || 3000;
    window.setTimeout(function () {
      fetch(window.location.href, { credentials: "same-origin", headers: { "X-Arena-Poll": "1" } })
        .then(function (answer) { return answer.ok ? answer.text() : Promise.reject(answer.status); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(element.id);
          var current = document.getElementById(element.id);
          if (!fresh || !current) { return; }
          current.replaceWith(fresh);
          fresh.querySelectorAll("table[data-sortable]").forEach(makeSortable);
          if (fresh.getAttribute("data-live") === "on") { poll(fresh); }
        })
        .catch(function () { poll(element); });
    }, interval);
  }

  /* Say before the upload that the chosen zip is one already submitted here (same SHA-256):
   * it would count against the quota again. crypto.subtle exists on https and localhost only;
   * elsewhere nothing is said and the upload works as before. */
  function warnDuplicate(form) {
    var input = form.querySelector("input[type=file]");
    var note = form.querySelector("#duplicate");
    var earlier = {};
    try { earlier = JSON.parse(form.getAttribute("data-earlier") || "{}"); } catch (e) { return; }
    if (!input || !note || !window.crypto || !window.crypto.subtle || !input.files) { return; }
    input.addEventListener("change", function () {
      note.hidden = true;
      var file = input.files[0];
      if (!file || !file.arrayBuffer) { return; }
      file.arrayBuffer().then(function (bytes) {
        return window.crypto.subtle.digest("SHA-256", bytes);
      }).then(function (digest) {
        var hex = Array.prototype.map.call(new Uint8Array(digest), function (b) {
          return ("0" + b.toString(16)).slice(-2);
        }).join("");
        if (earlier[hex]) {
          note.textContent = "This zip is identical to your submission #" + earlier[hex] +
            " in this phase: submitting it again counts against your quota again.";
          note.hidden = false;
        }
      }).catch(function () { /* no warning rather than a broken form */ });
    });
  }

  function enhanceUpload(form) {
    warnDuplicate(form);
    var progress = form.querySelector("progress");
    var status = form.querySelector(".upload-status");
    form.addEventListener("submit", function (event) {
      if (!window.FormData || !window.XMLHttpRequest) { return; }
      event.preventDefault();
      var xhr = new XMLHttpRequest();
      var button = form.querySelector("button[type=submit]");
      button.disabled = true;
      progress.hidden = false;
      progress.value = 0;
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) {
          progress.value = Math.round((100 * e.loaded) / e.total);
          status.textContent = "Uploading: " + progress.value + "%";
        }
      });
      xhr.upload.addEventListener("load", function () {
        progress.value = 100;
        status.textContent = "Uploaded; checking the zip…";
      });
      xhr.addEventListener("load", function () {
        if (xhr.status === 200 && xhr.responseURL && xhr.responseURL !== window.location.href) {
          window.location.assign(xhr.responseURL);   /* the submission page */
          return;
        }
        var page = new DOMParser().parseFromString(xhr.responseText, "text/html");
        var message = page.querySelector("main .error");
        status.textContent = message ? message.textContent : "The upload failed (HTTP " + xhr.status + ").";
        status.classList.add("error");
        button.disabled = false;
      });
      xhr.addEventListener("error", function () {
        status.textContent = "The connection failed; nothing was submitted. Try again.";
        status.classList.add("error");
        button.disabled = false;
      });
      status.classList.remove("error");
      xhr.open("POST", form.action);
      xhr.send(new FormData(form));
    });
  }

  function duration(seconds) {
    var days = Math.floor(seconds / 86400), hours = Math.floor((seconds % 86400) / 3600);
    var minutes = Math.floor((seconds % 3600) / 60);
    if (days) { return days + (days === 1 ? " day" : " days") + (hours ? " " + hours + " h" : ""); }
    if (hours) { return hours + " h" + (minutes ? " " + minutes + " min" : ""); }
    return minutes ? minutes + " min" : "under a minute";
  }

  function tickCountdowns() {
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var left = (Date.parse(el.getAttribute("datetime")) - Date.now()) / 1000;
      var verb = el.getAttribute("data-countdown");
      if (isNaN(left)) { return; }
      el.textContent = left > 0 ? verb + " in " + duration(left) : (verb === "opens" ? "opened" : "closed") + " — reload the page";
    });
  }

  /* Delegated: forms inside a live-refreshed region are replaced every few seconds. */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); }
  }, true);

  document.querySelectorAll("table[data-sortable]").forEach(makeSortable);
  if (document.querySelector("time[data-countdown]")) { window.setInterval(tickCountdowns, 30000); }
  document.querySelectorAll("[data-live='on'][id]").forEach(poll);
  document.querySelectorAll("form[data-upload]").forEach(enhanceUpload);
}());
