// The approval desk's queue refreshes by itself: every few seconds the page is fetched again. When the
// requests listed changed (one arrived, one was decided) the page is reloaded, so Django's own list
// scripts stay in charge of it; otherwise the ages and times to expiry are brought up to date in place.
// Nothing happens while the operator has selected rows or chosen an action, or the tab is hidden.
(function () {
  "use strict";
  const marker = document.getElementById("queue-refresh");
  if (!marker) { return; }
  const seconds = Math.max(parseInt(marker.dataset.refreshSeconds || "15", 10), 2);

  function busy() {
    const checked = document.querySelectorAll("#result_list input.action-select:checked");
    const action = document.querySelector("#changelist-form select[name=action]");
    return checked.length > 0 || Boolean(action && action.value !== "");
  }

  function rows(doc) {
    const found = new Map();
    doc.querySelectorAll("#result_list tbody tr").forEach(function (row) {
      const link = row.querySelector("th a, td a");
      if (link) { found.set(link.getAttribute("href"), row); }
    });
    return found;
  }

  function sameKeys(a, b) {
    if (a.size !== b.size) { return false; }
    for (const key of a.keys()) { if (!b.has(key)) { return false; } }
    return true;
  }

  async function refresh() {
    if (document.visibilityState !== "visible" || busy()) { return; }
    let fresh;
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin" });
      if (!response.ok) { return; }
      fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    } catch (error) {
      return; // the network or the server is away: try again at the next tick
    }
    if (busy()) { return; }
    const shown = rows(document);
    const latest = rows(fresh);
    if (document.title !== fresh.title || !sameKeys(shown, latest)) {
      window.location.reload();
      return;
    }
    latest.forEach(function (row, key) {
      ["td.field-age", "td.field-expires_in"].forEach(function (selector) {
        const now = shown.get(key).querySelector(selector);
        const next = row.querySelector(selector);
        if (now && next) { now.innerHTML = next.innerHTML; }
      });
    });
    const stamp = document.getElementById("queue-refreshed-at");
    if (stamp) { stamp.textContent = " (last checked " + new Date().toLocaleTimeString() + ")"; }
  }

  window.setInterval(refresh, seconds * 1000);
})();
