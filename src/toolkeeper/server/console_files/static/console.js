// The approvals queue, kept live from the server's events (/console/events). Every value is
// set as text (never as HTML), already escaped by the server for control and bidi characters.
"use strict";

function row(approval) {
  const tr = document.createElement("tr");
  const link = document.createElement("a");
  link.href = "/console/approvals/" + encodeURIComponent(approval.id);
  link.textContent = approval.id;
  const first = document.createElement("td");
  first.appendChild(link);
  tr.appendChild(first);
  for (const key of ["tool", "principal", "reason", "created"]) {
    const td = document.createElement("td");
    td.textContent = approval[key];
    tr.appendChild(td);
  }
  return tr;
}

function follow(table) {
  const body = table.querySelector("tbody");
  const live = document.getElementById("live");
  const source = new EventSource(table.dataset.live);
  source.addEventListener("approvals", (event) => {
    const approvals = JSON.parse(event.data);
    const rows = approvals.map(row);
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      tr.className = "empty";
      const td = document.createElement("td");
      td.colSpan = 5;
      td.textContent = "Nothing waits for a decision.";
      tr.appendChild(td);
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    table.dataset.count = String(approvals.length);
    if (live) {
      live.textContent = approvals.length + " waiting; new requests appear here as they come.";
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const table = document.querySelector("table[data-live]");
  if (table) {
    follow(table);
  }
});
