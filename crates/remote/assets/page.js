// The question page and the dashboard: a countdown, answering without a reload, live updates.
// Served from the binary as a file of its own: the page's Content-Security-Policy allows no
// inline script.
"use strict";

function fmt(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

function countdown(main) {
  const el = document.getElementById("countdown");
  if (!el || !main.dataset.leftMs) return;
  const end = Date.now() + Number(main.dataset.leftMs);
  const tick = () => {
    if (main.classList.contains("closed")) return;
    const left = end - Date.now();
    el.textContent = left > 0 ? fmt(left) + " left" : "deadline passed: the agent goes on with its best guess; a late answer still reaches it";
    el.classList.toggle("urgent", left < 60000);
    if (left > 0) setTimeout(tick, 1000 - (left % 1000) || 1000);
  };
  tick();
}

function show(text, error) {
  const r = document.getElementById("result");
  r.textContent = text;
  r.classList.toggle("error", !!error);
}

function close(main, text) {
  main.classList.add("closed");
  show(text, false);
  const el = document.getElementById("countdown");
  if (el) el.textContent = "closed";
}

function answerForm(main) {
  const form = document.getElementById("answer");
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = ev.submitter || form.querySelector("button.send");
    const picked = Array.from(form.querySelectorAll("input[name=option]:checked")).map((i) => Number(i.value));
    const note = form.querySelector("textarea").value;
    let body = picked.length ? { options: picked, answer: note } : { answer: note };
    if (button.name === "action") body = { action: button.value };
    button.disabled = true;
    try {
      const res = await fetch(main.dataset.post, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const reply = await res.json().catch(() => ({ message: "The broker answered HTTP " + res.status + "." }));
      if (res.status === 202) show(reply.message, false);
      else if (res.ok) close(main, reply.message);
      else show(reply.message, true);
      if (res.status === 409) main.classList.add("closed");
    } catch (e) {
      show("Could not reach the broker: " + e.message, true);
    } finally {
      button.disabled = false;
    }
  });
}

function live(main) {
  if (!main.dataset.events || !window.EventSource) return;
  const source = new EventSource(main.dataset.events);
  // The page's own answer already says how it closed; the stream's news of the same close may
  // arrive after that reply and must not overwrite it.
  source.addEventListener("closed", (ev) => {
    source.close();
    if (!main.classList.contains("closed")) close(main, "This question closed: " + ev.data + ".");
  });
  source.addEventListener("changed", () => { source.close(); location.reload(); });
}

// The dashboard's stream sends the whole list of loops (HTML the broker made and escaped, as
// it made the page) at once and whenever a loop starts, ends, asks or is answered.
function liveDashboard(main) {
  if (!main.dataset.events || !window.EventSource) return;
  const source = new EventSource(main.dataset.events);
  source.addEventListener("loops", (ev) => { main.innerHTML = ev.data; });
}

document.addEventListener("DOMContentLoaded", () => {
  const main = document.querySelector("main");
  if (!main) return;
  if (main.classList.contains("dashboard")) {
    liveDashboard(main);
    return;
  }
  countdown(main);
  answerForm(main);
  live(main);
});
