// Slotmap admin: client-side sorting and live refresh from the JSON API.
// The pages work without this file; with it, numbers update every few seconds.
// Numbers are formatted exactly as admin_ui/format.py does: keep both in step.
"use strict";
(() => {
  const DASH = "\u2013";
  const KIB = 1024, MIB = KIB * 1024, GIB = MIB * 1024;
  const LOAD_INFINITE = 1e6;
  const roundTo = (v, d) => Math.floor(v * 10 ** d + 0.5) / 10 ** d;
  const group = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const FORMATS = {
    int: (v) => group(Math.floor(v + 0.5)),
    pct: (v) => (v >= LOAD_INFINITE ? "\u221e" : `${Math.floor(v * 100 + 0.5)}%`),
    f1: (v) => roundTo(v, 1).toFixed(1),
    f2: (v) => roundTo(v, 2).toFixed(2),
    secs: (v) => (v === 0 ? "0"
      : v < 0.001 ? `${Math.floor(v * 1000000 + 0.5)} \u00b5s`
      : v < 1 ? `${Math.floor(v * 1000 + 0.5)} ms` : `${roundTo(v, 1).toFixed(1)} s`),
    bytes: (v) => {
      for (const [unit, size] of [["GiB", GIB], ["MiB", MIB], ["KiB", KIB]]) {
        if (v >= size) return `${roundTo(v / size, 1).toFixed(1)} ${unit}`;
      }
      return `${Math.floor(v + 0.5)} B`;
    },
    cell: (v) => (v === 0 ? "" : FORMATS.int(v)),
    time: (v) => new Date(Math.floor(v) * 1000).toISOString().slice(0, 19).replace("T", " "),
    age: (s) => (s < 60 ? `${Math.floor(s)} s ago`
      : s < 3600 ? `${Math.floor(s / 60)} min ago` : `${Math.floor(s / 3600)} h ago`),
    age_fine: (s) => (s < 10 ? `${s.toFixed(1)} s ago` : FORMATS.age(s)),
  };
  const format = (v, kind) => (v === null || v === undefined ? DASH : FORMATS[kind](v));
  window.slotmapFormat = format; // the browser tests compare it with admin_ui/format.py

  // "a.b" -> obj.a.b; "" -> obj. Slot-map cells default to 0 slots.
  const lookup = (obj, path) => {
    if (!path) return obj;
    return path.split(".").reduce((o, key) => (o === null || o === undefined ? undefined : o[key]), obj);
  };

  // ---- sorting (same order as views.sort_queue_rows: ties stay in name order) ----
  const byName = (a, b) => (a.dataset.key < b.dataset.key ? -1 : a.dataset.key > b.dataset.key ? 1 : 0);
  const cellValue = (row, key) => {
    const cell = row.querySelector(`[data-field="${key}"]`);
    return cell ? parseFloat(cell.dataset.value) : NaN;
  };

  function sortTable(table, key, order) {
    const body = table.tBodies[0];
    const dir = order === "asc" ? 1 : -1;
    const rows = Array.from(body.rows).sort(byName);
    if (key === "queue") {
      if (dir < 0) rows.reverse();
    } else {
      rows.sort((a, b) => (cellValue(a, key) - cellValue(b, key)) * dir);
    }
    rows.forEach((row) => body.appendChild(row));
    table.dataset.sort = key;
    table.dataset.order = order;
    for (const th of table.tHead.querySelectorAll("th[data-sort]")) {
      const current = th.dataset.sort === key;
      if (current) th.setAttribute("aria-sort", order === "asc" ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
      const next = current ? (order === "asc" ? "desc" : "asc") : th.dataset.firstOrder;
      th.querySelector("a").setAttribute("href", `?sort=${th.dataset.sort}&order=${next}`);
    }
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("table.sortable th[data-sort] a");
    if (!link) return;
    event.preventDefault();
    const th = link.closest("th");
    const table = th.closest("table");
    const order = table.dataset.sort === th.dataset.sort
      ? (table.dataset.order === "asc" ? "desc" : "asc") : th.dataset.firstOrder;
    sortTable(table, th.dataset.sort, order);
    const url = new URL(location.href);
    url.searchParams.set("sort", th.dataset.sort);
    url.searchParams.set("order", order);
    history.replaceState(null, "", url);
  });

  // ---- jobs pages: the header box ticks or clears every job of its form ----
  document.addEventListener("change", (event) => {
    const all = event.target.closest("input[data-select-all]");
    if (!all) return;
    for (const box of all.form.querySelectorAll('input[type="checkbox"][name="key"]')) box.checked = all.checked;
  });

  // ---- bulk actions ask first (data-confirm); the server asks too when this file is not run ----
  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-confirm]");
    if (!button || !button.form) return;
    let text = button.dataset.confirm;
    if (button.dataset.confirmCount) {
      const ticked = button.form.querySelectorAll(`input[type="checkbox"][name="${button.dataset.confirmCount}"]:checked`).length;
      if (ticked === 0) {
        event.preventDefault();
        window.alert("Tick the jobs first.");
        return;
      }
      text = text.replace("the selected", `the ${ticked} selected`);
    }
    if (!window.confirm(text)) {
      event.preventDefault();
      return;
    }
    let mark = button.form.querySelector('input[name="confirm"]');
    if (!mark) {
      mark = document.createElement("input");
      mark.type = "hidden";
      mark.name = "confirm";
      button.form.appendChild(mark);
    }
    mark.value = "yes";
  });

  // ---- live refresh ----
  const owner = (el) => el.parentElement.closest("[data-obj],[data-key]");

  function fill(container, obj) {
    if (obj === undefined) return;
    for (const cell of container.querySelectorAll("[data-field]")) {
      if (owner(cell) !== container) continue;
      let value = lookup(obj, cell.dataset.field);
      if (value === undefined) {
        if (cell.dataset.fmt !== "cell") continue;
        value = 0;
      }
      cell.dataset.value = value === null || value === undefined ? "" : String(value);
      cell.textContent = format(value, cell.dataset.fmt);
      if (cell.dataset.fmt === "cell") cell.classList.toggle("nz", value !== 0);
      if (cell.dataset.trend !== undefined && obj.trend) cell.dataset.trend = obj.trend;
    }
  }

  const signature = (obj, fields) => fields.map((f) => (obj[f] ? "1" : "0")).join("");

  // True when rows came or went (or changed state): then the server re-renders the region.
  function structureChanged(main, data) {
    for (const body of main.querySelectorAll("[data-rows]")) {
      const items = lookup(data, body.dataset.rows) || [];
      const rows = Array.from(body.querySelectorAll(":scope > tr[data-key]"));
      const sigFields = body.dataset.sig ? body.dataset.sig.split(",") : [];
      const had = rows.map((r) => `${r.dataset.key}:${r.dataset.sig || ""}`).sort().join("\n");
      const has = items.map((i) => `${i[body.dataset.key]}:${sigFields.length ? signature(i, sigFields) : ""}`)
        .sort().join("\n");
      if (had !== has) return true;
    }
    for (const table of main.querySelectorAll("[data-columns-from]")) {
      if (table.dataset.columns !== (lookup(data, table.dataset.columnsFrom) || []).join(",")) return true;
    }
    return false;
  }

  async function swapLiveRegions() {
    const response = await fetch(location.href, { headers: { Accept: "text/html" } });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const region of document.querySelectorAll("[data-live][id]")) {
      const replacement = fresh.getElementById(region.id);
      if (replacement) region.replaceWith(document.importNode(replacement, true));
    }
  }

  function update(main, data) {
    for (const body of main.querySelectorAll("[data-rows]")) {
      const items = new Map((lookup(data, body.dataset.rows) || []).map((i) => [String(i[body.dataset.key]), i]));
      for (const row of body.querySelectorAll(":scope > tr[data-key]")) fill(row, items.get(row.dataset.key));
    }
    for (const el of main.querySelectorAll("[data-obj]")) fill(el, lookup(data, el.dataset.obj));
    for (const table of main.querySelectorAll("table.sortable[data-sort]")) {
      sortTable(table, table.dataset.sort, table.dataset.order);
    }
    const at = data.row ? String(data.row.at_unix) : null;
    if (at !== null && main.dataset.at !== at) {
      main.dataset.at = at;
      for (const img of main.querySelectorAll("img[data-chart]")) {
        const url = new URL(img.src);
        url.searchParams.set("at", at);
        img.src = url.toString();
      }
    }
  }

  async function refresh(main) {
    const response = await fetch(main.dataset.api, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const data = await response.json();
    if (structureChanged(main, data)) {
      await swapLiveRegions();
      const table = main.querySelector("table.sortable[data-sort]");
      if (table) sortTable(table, table.dataset.sort, table.dataset.order);
    }
    update(main, data);
  }

  function start() {
    const main = document.querySelector("main[data-api]");
    const every = Number(document.body.dataset.refreshMs || 0);
    const status = document.getElementById("live-status");
    if (!main || !(every > 0)) return;
    document.documentElement.dataset.live = "on";
    const tick = async () => {
      if (!document.hidden) {
        try {
          await refresh(main);
          status.textContent = "live";
          status.classList.remove("error");
          document.documentElement.dataset.refreshed = String(Number(document.documentElement.dataset.refreshed || 0) + 1);
        } catch (error) {
          status.textContent = `not updating: ${error.message}`;
          status.classList.add("error");
        }
      }
      setTimeout(tick, every);
    };
    setTimeout(tick, every);
  }

  // ---- confirmations: a form with data-confirm asks first; yes sends confirm=yes at once
  // (without JavaScript, the server answers such a form with a confirmation page instead).
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    if (!window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      return;
    }
    const yes = form.querySelector("input[name=confirm]") || form.appendChild(document.createElement("input"));
    Object.assign(yes, { type: "hidden", name: "confirm", value: "yes" });
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
