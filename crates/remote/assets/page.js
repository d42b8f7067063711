// The question page and the dashboard: a countdown, answering without a reload, live updates
// (a moved deadline updates the countdown in place, keeping what the user typed).
// Served from the binary as a file of its own: the page's Content-Security-Policy allows no
// inline script.
"use strict";

function fmt(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

// When the question's wait ends (ms since the epoch, by this page's clock); null for none.
let deadline = null;
let ticking = null;
// When the page last heard that the deadline moved.
let movedAt = 0;

const TIMED_OUT = "deadline passed: the agent goes on with its best guess; a late answer still reaches it";

function countdown(main) {
  const el = document.getElementById("countdown");
  clearTimeout(ticking);
  if (!el || deadline === null) return;
  const tick = () => {
    if (main.classList.contains("closed")) return;
    const left = deadline - Date.now();
    el.textContent = left > 0 ? fmt(left) + " left" : TIMED_OUT;
    el.classList.toggle("urgent", left < 60000);
    if (left > 0) ticking = setTimeout(tick, 1000 - (left % 1000) || 1000);
  };
  tick();
}

// "5 more minutes", "1 more hour": how far the deadline moved, in the words the buttons use.
function moved(ms) {
  const min = Math.round(ms / 60000);
  if (min >= 60 && min % 60 === 0) return min / 60 + (min === 60 ? " more hour" : " more hours");
  if (min >= 1) return min + (min === 1 ? " more minute" : " more minutes");
  return "The deadline moved";
}

// The question changed while the page is open (its deadline moved: "+5 min" here, Ctrl+E in
// the terminal, "+1 hour" in Telegram). Updated in place: what the user typed and picked stays.
function changed(main, data) {
  let now;
  try { now = JSON.parse(data); } catch (e) { return; }
  if (main.classList.contains("closed")) return;
  const el = document.getElementById("countdown");
  if (now.timed_out) {
    clearTimeout(ticking);
    deadline = null;
    if (el) el.textContent = TIMED_OUT;
    return;
  }
  if (now.left_ms === null) {
    clearTimeout(ticking);
    deadline = null;
    if (el) { el.textContent = "no deadline"; el.classList.remove("urgent"); }
    show("No deadline now: take your time.", false);
    return;
  }
  const before = deadline;
  movedAt = Date.now();
  deadline = movedAt + Number(now.left_ms);
  countdown(main);
  const left = fmt(deadline - Date.now()) + " left";
  show(before === null ? "The deadline moved: " + left : moved(deadline - before) + ": " + left, false);
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
    const sent = Date.now();
    try {
      const res = await fetch(main.dataset.post, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const reply = await res.json().catch(() => ({ message: "The broker answered HTTP " + res.status + "." }));
      // 202: the loop was asked for more time and the question stays open. The stream's news
      // of the moved deadline says more than the reply, and may have come first.
      if (res.status === 202) {
        if (!(movedAt >= sent)) show(reply.message, false);
      } else if (res.ok) close(main, reply.message);
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
  source.addEventListener("changed", (ev) => changed(main, ev.data));
  // Marked for whoever waits on the page (a test): from now on, news reaches it.
  source.addEventListener("open", () => { main.dataset.live = "open"; });
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
  if (main.dataset.leftMs) deadline = Date.now() + Number(main.dataset.leftMs);
  countdown(main);
  answerForm(main);
  live(main);
});
